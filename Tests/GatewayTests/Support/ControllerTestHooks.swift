@testable import FeatureAlerts
import Foundation
@testable import GatewayCore

/// What tests drive by hand that the gateway runs on its own timers.
extension GatewayController {
    /// Ends the retained sweep now (the gateway ends it `RetainedSweep.sweepDuration` after the first connect).
    func endRetainedSweep() {
        for case let sweep as RetainedSweep in hub.extensions { sweep.endRetainedSweep() }
    }

    /// Runs the `unusual_consumption` check for the hour starting at `hour` (the gateway runs it hourly).
    func checkConsumption(hour: Date) async {
        for case let alerts as AlertsExtension in hub.extensions { await alerts.checkConsumption(hour: hour) }
    }
}
