#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import VendorKit

/// Commands that arrive before their vendor has listed its devices. Right after a start (and at once after an
/// active/standby takeover, whose resumed MQTT session delivers the commands queued for it) the broker hands over
/// `/set` and `/get` before the vendors' first inventory: refusing them as `unknown_device` would lose commands
/// the user sent to real devices. They wait, in order and bounded, for that vendor's inventory (at most one poll
/// interval, as availability does) and are then handled as if they had just arrived.
extension Commands {
    package struct EarlyCommand: Sendable {
        var message: InboundMessage
        var route: Topics.Inbound
        var vendorID: String
        /// A lock command that waited keeps its 10 s TTL from here, not from its release.
        var receivedAt: Date
    }

    /// Commands held for inventories at once; beyond it they fail as `unknown_device` as before.
    package static let earlyCommandLimit = 1_000

    /// Holds `message` when its device id belongs to a configured vendor that has not given its first inventory.
    package func holdUntilInventory(_ message: InboundMessage, route: Topics.Inbound) -> Bool {
        let rawID: String
        switch route {
        case .set(let device, _), .get(let device): rawID = device
        default: return false
        }
        guard let vendorID = hub.configuredVendor(owning: rawID), !hub.inventoriedVendors.contains(vendorID),
              !inventoryWaitOver.contains(vendorID), awaitingInventory.count < Self.earlyCommandLimit else { return false }
        if !awaitingInventory.contains(where: { $0.vendorID == vendorID }) { startInventoryGrace(for: vendorID) }
        awaitingInventory.append(EarlyCommand(message: message, route: route, vendorID: vendorID, receivedAt: hub.now()))
        hub.logger.debug("\(message.topic): waiting for vendor \(vendorID)'s first device list")
        return true
    }

    /// Handles the commands held for `vendorID`, in arrival order.
    package func releaseEarlyCommands(of vendorID: String) {
        guard awaitingInventory.contains(where: { $0.vendorID == vendorID }) else { return }
        let released = awaitingInventory.filter { $0.vendorID == vendorID }
        awaitingInventory.removeAll { $0.vendorID == vendorID }
        for early in released {
            switch early.route {
            case .set(let rawID, let key): handleSet(early.message, rawID: rawID, key: key, receivedAt: early.receivedAt)
            case .get(let rawID): handleGet(early.message, rawID: rawID)
            default: break
            }
        }
    }

    private func startInventoryGrace(for vendorID: String) {
        let grace = GatewayHub.availabilityGrace(hub.config.vendors.first { $0.id == vendorID }?.pollInterval)
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            do { try await clock.sleep(for: grace) } catch { return }
            guard !hub.inventoriedVendors.contains(vendorID) else { return }
            inventoryWaitOver.insert(vendorID)
            releaseEarlyCommands(of: vendorID)
        }
    }
}
