import GatewayCore
import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// Alerts on the normalized stream, whatever the vendor (`AlertRules`): a water leak, and environment readings
/// outside their limits. Each alert is
/// - an event on `<base>/bridge/event` (`alert_raised`, `alert_cleared`),
/// - a retained `<base>/alert/<rule>_<device id>` (`{"state":"ON"|"OFF", …}`), which the device's Home
///   Assistant binary sensor for that rule follows,
/// - kept in the cache while active, so a restart neither raises it again nor forgets to clear it.
@GatewayActor
package final class AlertsExtension: GatewayExtension {
    package let hub: GatewayHub
    private let store: CacheStore?
    private var rules: AlertRules
    /// Alert topics published, so a vanished device's are cleared and states are not sent twice.
    private var announced: [String: Bool] = [:]
    private var hourlyStarted = false

    package init(hub: GatewayHub, store: CacheStore?) {
        self.hub = hub
        self.store = store
        var restored: [Alert] = []
        if let store {
            do {
                for (_, text) in try store.alerts() {
                    if case .success(let json) = JSONValue.parse(Array(text.utf8)), let alert = Alert(json: json) { restored.append(alert) }
                }
            } catch {
                hub.logger.error("cannot read the active alerts from the cache: \(error)")
            }
        }
        rules = AlertRules(settings: hub.config.alerts, active: restored)
    }

    package var activeAlerts: [Alert] { rules.active.values.sorted { $0.id < $1.id } }

    package func handle(_ event: HubEvent) {
        switch event {
        case .connected:
            startHourlyChecks()
            announced.removeAll()
            for id in hub.devices.keys.sorted() { if let device = hub.devices[id] { announce(device) } }
        case .deviceAdded(let device, let restored):
            if !restored { announce(device) }
        case .deviceChanged(let device):
            announce(device)
        case .deviceRemoved(let device):
            for alert in rules.forget(device.id) { store(cleared: alert) }
            let suffix = "_" + device.id.rawValue
            for id in announced.keys where id.hasSuffix(suffix) {
                hub.transport.publish(hub.topics.alert(id), "", qos: 1, retain: true)
                announced[id] = nil
            }
        case .stateUpdated(let id, _, let changed, let observedAt, _):
            guard changed, let device = hub.devices[id], let values = hub.states[id]?.values else { return }
            for change in rules.evaluate(device, values: values, at: observedAt) { apply(change) }
        default:
            break
        }
    }

    /// The retained state of every rule of a device (OFF unless active), so its binary sensors have a state.
    private func announce(_ device: Device) {
        for rule in hub.config.alerts.rules(for: device) {
            let id = AlertRules.id(rule.name, device.id)
            let alert = rules.active[id]
            guard announced[id] != (alert != nil) else { continue }
            announced[id] = alert != nil
            let text: String
            if let alert {
                var payload = alert.fields
                payload["state"] = "ON"
                text = JSON.object(payload).render()
            } else {
                text = Self.inactive(id: id, rule: rule.name, device: device.id.rawValue)
            }
            hub.transport.publish(hub.topics.alert(id), text, qos: 1, retain: true)
        }
    }

    /// `{"alert","device","rule","state":"OFF"}` as `JSON.render` writes it (keys sorted), written directly: a
    /// connect announces every rule of every device (2,500 with 1,000 devices) before the first state.
    nonisolated static func inactive(id: String, rule: String, device: String) -> String {
        var out = #"{"alert":"#
        JSONText.appendQuoted(id, to: &out)
        out += #","device":"#
        JSONText.appendQuoted(device, to: &out)
        out += #","rule":"#
        JSONText.appendQuoted(rule, to: &out)
        out += #","state":"OFF"}"#
        return out
    }

    private func apply(_ change: AlertChange) {
        switch change {
        case .raised(let alert):
            var payload = alert.fields
            payload["state"] = "ON"
            hub.transport.publish(hub.topics.alert(alert.id), JSON.object(payload).render(), qos: 1, retain: true)
            announced[alert.id] = true
            hub.publishEvent(.alertRaised, .object(payload))
            hub.logger.warning("alert \(alert.id): \(alert.message)")
            if let store {
                let id = alert.id, text = alert.json.render()
                hub.tasks.spawn { [hub] in
                    do { try await store.run { try $0.saveAlert(id: id, json: text) } } catch { hub.logger.error("cannot store alert \(id): \(error)") }
                }
            }
        case .cleared(let alert, let at):
            var payload = alert.fields
            payload["state"] = "OFF"
            payload["cleared_at"] = .string(ISOTime.format(at))
            hub.transport.publish(hub.topics.alert(alert.id), JSON.object(payload).render(), qos: 1, retain: true)
            announced[alert.id] = false
            hub.publishEvent(.alertCleared, .object(payload))
            hub.logger.notice("alert \(alert.id) cleared")
            store(cleared: alert)
        }
    }

    // MARK: Unusual consumption

    /// Five minutes after each full hour (the last readings of the hour are in the cache by then), the hour
    /// that ended is compared with the same hour of earlier days. Needs `storage:`.
    private func startHourlyChecks() {
        guard !hourlyStarted, store != nil, hub.config.alerts.consumptionFactor > 0 else { return }
        hourlyStarted = true
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            while !Task.isCancelled {
                let now = hub.now().timeIntervalSince1970
                let next = (now / 3600).rounded(.down) * 3600 + 3600 + 300
                do { try await clock.sleep(for: .clampedSeconds(next - now)) } catch { return }
                await checkConsumption(hour: Date(timeIntervalSince1970: next - 300 - 3600))
            }
        }
    }

    /// Evaluates `unusual_consumption` for the hour starting at `hour` on every device with a usage counter.
    package func checkConsumption(hour: Date) async {
        guard let store else { return }
        let settings = hub.config.alerts
        let start = (hour.timeIntervalSince1970 / 3600).rounded(.down) * 3600
        for id in hub.devices.keys.sorted() {
            guard let device = hub.devices[id], let key = AlertSettings.consumptionKeys.first(where: { device.keys.contains($0.key) })?.key else { continue }
            let from = start - Double(settings.consumptionDays) * 86_400, to = start + 3600
            let raw = id.rawValue
            let points: [HistoryPoint]
            do {
                points = try await store.runReading { try $0.history(deviceID: raw, key: key, from: from, to: to, resolution: .hourly) }
            } catch {
                hub.logger.error("cannot read the hourly history of \(raw).\(key): \(error)")
                continue
            }
            var byHour: [Int64: Double] = [:]
            for point in points { if let sum = point.sum { byHour[Int64(point.time)] = sum } }
            guard let use = byHour[Int64(start)] else { continue }
            let before = (1...settings.consumptionDays).compactMap { byHour[Int64(start) - Int64($0) * 86_400] }
            // The device may have gone while the cache was read.
            guard let current = hub.devices[id] else { continue }
            for change in rules.evaluateConsumption(current, key: key, use: use, sameHourBefore: before, hour: Date(timeIntervalSince1970: start)) {
                apply(change)
            }
        }
    }

    private func store(cleared alert: Alert) {
        guard let store else { return }
        let id = alert.id
        hub.tasks.spawn { [hub] in
            do { try await store.run { try $0.deleteAlert(id: id) } } catch { hub.logger.error("cannot forget alert \(id): \(error)") }
        }
    }
}
