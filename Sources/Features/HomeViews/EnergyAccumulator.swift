import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The home's energy and volume counters (`grid_import_energy`, `water_volume` …) in `<base>/energy/home`,
/// accumulated from each source's increments, never summed from their levels: a sum of levels jumps whenever a
/// source appears or disappears (a vendor that has not answered yet after a restart), and drops when a daily
/// counter starts again at midnight; Home Assistant's long-term statistics book every such jump as real use.
///
/// - A source's first reading (in this run) is its baseline: it adds nothing.
/// - An increase adds to the home total.
/// - A reset (a daily counter at midnight, a replaced meter: a drop of more than 10 %, or to 0) adds nothing and
///   becomes the new baseline; a smaller drop (a rounding wobble) is ignored, so the value it comes back to is
///   not counted twice.
/// - The totals continue across restarts: they start from the larger of the cache's and the broker's retained
///   `energy/home` (`restore`), so a restored total never goes below what the broker last held.
package struct EnergyAccumulator: Sendable, Equatable {
    /// Where the totals started in this run (restored), per counter key.
    package private(set) var base: [String: Double] = [:]
    /// What sources added in this run, per counter key.
    package private(set) var added: [String: Double] = [:]
    /// Each source's level after its last reading (the highest since its last reset), by "device key".
    private var levels: [String: Double] = [:]

    /// A drop larger than this share of the level is a reset.
    package static let resetDrop = 0.10

    /// The current total of every counter a source reported or a restore brought.
    package var totals: [String: Double] {
        var totals = base
        for (key, value) in added { totals[key, default: 0] += value }
        return totals
    }

    /// A reading of counter `key` from `source`; returns the amount added to the home total.
    @discardableResult
    package mutating func observe(source: String, key: String, value: Double) -> Double {
        guard value.isFinite, value >= 0 else { return 0 }
        let slot = source + " " + key
        guard let level = levels[slot] else {
            levels[slot] = value
            if added[key] == nil { added[key] = 0 }
            return 0
        }
        if value >= level {
            let increase = value - level
            levels[slot] = value
            added[key, default: 0] += increase
            return increase
        }
        if value == 0 || level - value > level * Self.resetDrop { levels[slot] = value }
        return 0
    }

    /// A source that went away: its next reading (if it comes back) is a new baseline.
    package mutating func forget(source: String) {
        let prefix = source + " "
        levels = levels.filter { !$0.key.hasPrefix(prefix) }
    }

    /// Totals from an earlier run (the cache, or the broker's retained message): each key continues from the
    /// larger of what it started from and `totals`.
    package mutating func restore(_ totals: [String: Double]) {
        for (key, value) in totals where value.isFinite && value >= 0 {
            base[key] = max(base[key] ?? 0, value)
        }
    }
}
