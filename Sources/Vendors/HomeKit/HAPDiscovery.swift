#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import GatewayModel
import VendorKit

/// One `_hap._tcp` service seen over mDNS: an accessory's name, its TXT record and where it answers.
public struct HAPServiceRecord: Sendable, Equatable {
    public var name: String
    /// `id`: the accessory's pairing id, `AA:BB:CC:DD:EE:FF` (upper-cased here).
    public var deviceID: String
    public var model: String?
    /// `ci`: what the accessory is (2 bridge, 5 lightbulb, 9 thermostat …).
    public var category: Int?
    /// `sf`: 1 = not paired, 2 = not configured for Wi-Fi, 4 = a problem.
    public var statusFlags: Int?
    /// `c#`: bumps when the accessory's database changes.
    public var configNumber: Int?
    public var address: String
    public var port: Int
    public var interface: String

    public var isPaired: Bool { (statusFlags ?? 0) & 1 == 0 }

    public static let categories: [Int: String] = [
        1: "other", 2: "bridge", 3: "fan", 4: "garage_door", 5: "lightbulb", 6: "door_lock", 7: "outlet", 8: "switch", 9: "thermostat",
        10: "sensor", 11: "security_system", 12: "door", 13: "window", 14: "window_covering", 15: "programmable_switch", 16: "range_extender",
        17: "ip_camera", 18: "video_doorbell", 19: "air_purifier", 20: "heater", 21: "air_conditioner", 22: "humidifier", 23: "dehumidifier",
        28: "sprinkler", 29: "faucet", 30: "shower_head", 31: "television", 32: "remote",
    ]

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "name": .string(name), "id": .string(deviceID), "address": .string(address), "port": .number(Double(port)), "paired": .bool(isPaired),
        ]
        if let model { object["model"] = .string(model) }
        if let category {
            object["category"] = .number(Double(category))
            if let word = Self.categories[category] { object["category_name"] = .string(word) }
        }
        if let statusFlags { object["status_flags"] = .number(Double(statusFlags)) }
        if let configNumber { object["config_number"] = .number(Double(configNumber)) }
        return .object(object)
    }
}

/// Finds `_hap._tcp` services on the LAN.
public protocol HAPServiceBrowserProtocol: Sendable {
    /// Every service resolved now (one record per accessory, its best address).
    func browse() async throws -> [HAPServiceRecord]
}

/// mDNS through the system's Avahi daemon: `avahi-browse` (avahi-utils) asks it over D-Bus, so the gateway
/// neither binds port 5353 nor answers queries itself, and shares Avahi's cache with everything else on the box.
public struct AvahiBrowser: HAPServiceBrowserProtocol {
    var executable: String
    var timeout: Duration

    public init(executable: String = "avahi-browse", timeout: Duration = .seconds(5)) {
        self.executable = executable
        self.timeout = timeout
    }

    public func browse() async throws -> [HAPServiceRecord] {
        let output = try await run([executable, "--parsable", "--resolve", "--terminate", "--no-db-lookup", "_hap._tcp"])
        return Self.parse(output)
    }

    /// Runs the browser with a deadline; its output, or a clear error when Avahi is not there.
    private func run(_ arguments: [String]) async throws -> String {
        let process: ChildProcess
        do {
            process = try ChildProcess.spawn(arguments, captureOutput: true)
        } catch {
            throw Self.unavailable(error.notFound ? "\(executable) is not installed" : error.description)
        }
        let deadline = Task {
            try await Task.sleep(for: timeout)
            process.kill(SIGKILL)
        }
        defer { deadline.cancel() }
        // Both pipes at once: a child blocked on a full one would never close the other.
        async let errorBytes = Self.readAll(process.errors)
        let data = await Self.readAll(process.output)
        let stderr = String(decoding: await errorBytes, as: UTF8.self)
        let status = await process.waitForExit()
        if case .exited(let code) = status, code != 0, data.isEmpty {
            throw Self.unavailable(stderr.split(separator: "\n").first.map(String.init) ?? "\(executable) failed (\(code))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    private static func readAll(_ descriptor: Int32?) async -> [UInt8] {
        guard let descriptor else { return [] }
        return await ChildProcess.readToEnd(descriptor)
    }

    static func unavailable(_ reason: String) -> GatewayError {
        GatewayError(.vendorUnavailable, message: "mDNS browsing is not available: \(reason).",
                     suggestion: "Install and start Avahi (apt-get install avahi-daemon avahi-utils), or give the accessory's host and port.",
                     countsAgainstVendor: false)
    }

    /// `avahi-browse --parsable --resolve` lines: `=;iface;IPv4;name;_hap._tcp;local;host;address;port;"k=v" …`.
    /// One record per accessory id: IPv4 before IPv6, a LAN address before loopback and link-local.
    static func parse(_ output: String) -> [HAPServiceRecord] {
        var best: [String: (rank: Int, record: HAPServiceRecord)] = [:]
        var order: [String] = []
        for line in output.split(separator: "\n") where line.hasPrefix("=;") {
            let fields = splitFields(String(line))
            guard fields.count >= 10, let port = Int(fields[8]) else { continue }
            let txt = txtRecord(fields[9...].joined(separator: ";"))
            guard let id = txt["id"]?.uppercased(), !id.isEmpty else { continue }
            let address = fields[7]
            let record = HAPServiceRecord(
                name: unescape(fields[3]), deviceID: id, model: txt["md"], category: txt["ci"].flatMap { Int($0) },
                statusFlags: txt["sf"].flatMap { Int($0) }, configNumber: txt["c#"].flatMap { Int($0) }, address: address, port: port, interface: fields[1]
            )
            let rank = (fields[2] == "IPv4" ? 0 : 2) + (address.hasPrefix("127.") || address == "::1" || address.lowercased().hasPrefix("fe80") ? 1 : 0)
            if best[id] == nil { order.append(id) }
            if let current = best[id], current.rank <= rank { continue }
            best[id] = (rank, record)
        }
        return order.compactMap { best[$0]?.record }
    }

    /// `;`-separated fields, where the TXT part (quoted strings) may itself contain `;`.
    static func splitFields(_ line: String) -> [String] {
        var fields: [String] = []
        var current = ""
        var quoted = false
        for character in line {
            if character == "\"" { quoted.toggle() }
            if character == ";", !quoted, fields.count < 9 {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }

    /// `"c#=2" "id=AA:BB…" "md=Eve Energy"` → keys and values (Avahi quotes each string; `\"` and `\\` escaped).
    static func txtRecord(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        var current = ""
        var inside = false
        var escaped = false
        for character in text {
            if inside {
                if escaped {
                    current.append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inside = false
                    if let equals = current.firstIndex(of: "=") {
                        values[String(current[..<equals]).lowercased()] = String(current[current.index(after: equals)...])
                    }
                    current = ""
                } else {
                    current.append(character)
                }
            } else if character == "\"" {
                inside = true
            }
        }
        return values
    }

    /// Avahi escapes a service name's dots, backslashes and non-printable bytes as `\.`, `\\` and `\DDD` (decimal).
    static func unescape(_ text: String) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(text.utf8)
        var index = 0
        let backslash = UInt8(ascii: "\\")
        while index < utf8.count {
            let byte = utf8[index]
            if byte == backslash, index + 4 <= utf8.count, utf8[(index + 1)...(index + 3)].allSatisfy({ (48...57).contains($0) }),
               let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self)) {
                bytes.append(value)
                index += 4
            } else if byte == backslash, index + 1 < utf8.count {
                bytes.append(utf8[index + 1])
                index += 2
            } else {
                bytes.append(byte)
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
