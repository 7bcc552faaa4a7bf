import Foundation
import GatewayModel
import Logging

extension GatewayController {
    /// Publishes a vendor's health, announces changes of state or breaker as `vendor_state_changed`,
    /// and makes the vendor's devices' availability follow it.
    func applyHealth(_ health: VendorHealth) {
        let previous = vendorHealth[health.vendorID]
        let previousShown = previous.map(shownState)
        if health.lastSuccess != nil { answeredVendors.insert(health.vendorID) }
        vendorHealth[health.vendorID] = health
        // Any change counts, `next_attempt` moving included (a stale time in the past misleads).
        if previous != health { publishVendorHealth(health) }
        if persistence != nil {
            pendingWrites.health.append((health.vendorID, vendorHealthJSON(health).render()))
            schedulePersist()
        }
        let shown = shownState(health)
        if previousShown != shown || previous?.breaker != health.breaker {
            var data: [String: JSON] = [
                "vendor": .string(health.vendorID), "state": .string(shown), "breaker": .string(health.breaker),
            ]
            if let previousShown { data["previous_state"] = .string(previousShown) }
            if let error = health.lastError { data["error"] = errorJSON(error) }
            publishEvent("vendor_state_changed", .object(data))
            logHealthChange(health, shown: shown)
        }
        // A vendor's devices are announced online only after it answered once: not on the optimistic
        // `ok` a vendor reports before its first call.
        let online = health.state != .down && answeredVendors.contains(health.vendorID)
        for device in devices.values where device.vendorID == health.vendorID && availability[device.id] != online {
            availability[device.id] = online
            publishAvailability(device.id)
        }
        if previous?.state == .down, health.state != .down { vendorRecovered(health.vendorID) }
    }

    /// The state users see: `starting` until the vendor answered or failed once (a vendor reports `ok` before
    /// its first call, which would announce devices online for a moment at every start with the vendor down).
    func shownState(_ health: VendorHealth) -> String {
        if health.state == .ok, health.lastSuccess == nil, health.lastError == nil, !answeredVendors.contains(health.vendorID) {
            return "starting"
        }
        return health.state.rawValue
    }

    /// One line per change that says what happened and what to do.
    func logHealthChange(_ health: VendorHealth, shown: String) {
        var line = "vendor \(health.vendorID) is \(shown) (breaker \(health.breaker))"
        if health.state != .ok, let error = health.lastError {
            line += ": \(error.code.rawValue): \(error.message)"
            if let next = health.nextAttempt {
                line += " Next attempt in \(GatewayError.readable(.seconds(max(0, next.timeIntervalSince(now())))))."
            }
            line += " \(error.suggestion)"
        }
        switch health.state {
        case .ok: logger.notice("\(line)")
        case .degraded: logger.warning("\(line)")
        case .down: logger.error("\(line)")
        }
    }

    func publishVendorHealth(_ health: VendorHealth) {
        transport.publish(topics.vendor(health.vendorID), vendorHealthJSON(health).render(), qos: 1, retain: true)
    }

    func vendorHealthJSON(_ health: VendorHealth) -> JSON {
        var object: [String: JSON] = [
            "state": .string(shownState(health)), "breaker": .string(health.breaker),
            "last_success": health.lastSuccess.map { .string(ISOTime.format($0)) } ?? .null,
            "last_error": health.lastError.map(errorJSON) ?? .null,
            "next_attempt": health.nextAttempt.map { .string(ISOTime.format($0)) } ?? .null,
        ]
        if !health.quota.isEmpty {
            object["quota"] = .object(health.quota.mapValues { .object($0.mapValues(JSON.number)) })
        }
        return .object(object)
    }

    /// Hook for work that waited for the vendor (the command outbox).
    func vendorRecovered(_ vendorID: String) {
        logger.info("vendor \(vendorID) recovered")
    }
}
