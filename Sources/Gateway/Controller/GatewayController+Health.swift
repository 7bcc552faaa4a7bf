import Foundation
import GatewayModel
import Logging

extension GatewayController {
    /// Publishes a vendor's health, announces changes of state or breaker as `vendor_state_changed`,
    /// and makes the vendor's devices' availability follow it.
    func applyHealth(_ health: VendorHealth) {
        let previous = vendorHealth[health.vendorID]
        vendorHealth[health.vendorID] = health
        publishVendorHealth(health)
        if persistence != nil {
            pendingWrites.health.append((health.vendorID, vendorHealthJSON(health).render()))
            schedulePersist()
        }
        if previous?.state != health.state || previous?.breaker != health.breaker {
            var data: [String: JSON] = [
                "vendor": .string(health.vendorID), "state": .string(health.state.rawValue), "breaker": .string(health.breaker),
            ]
            if let previous { data["previous_state"] = .string(previous.state.rawValue) }
            if let error = health.lastError { data["error"] = errorJSON(error) }
            publishEvent("vendor_state_changed", .object(data))
            logger.notice("vendor \(health.vendorID) is \(health.state.rawValue) (breaker \(health.breaker))")
        }
        let online = health.state != .down
        for device in devices.values where device.vendorID == health.vendorID && availability[device.id] != online {
            availability[device.id] = online
            publishAvailability(device.id)
        }
        if previous?.state == .down, health.state != .down { vendorRecovered(health.vendorID) }
    }

    func publishVendorHealth(_ health: VendorHealth) {
        transport.publish(topics.vendor(health.vendorID), vendorHealthJSON(health).render(), qos: 1, retain: true)
    }

    func vendorHealthJSON(_ health: VendorHealth) -> JSON {
        var object: [String: JSON] = [
            "state": .string(health.state.rawValue), "breaker": .string(health.breaker),
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
