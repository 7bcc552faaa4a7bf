// libFuzzer harness for the command parser (the `CommandParsing` target) and the strict JSON parser. Built and
// run by deploy/fuzz.sh (LBS_FUZZ=1: libFuzzer and AddressSanitizer); see FuzzDriver for replay. Every broken
// invariant is reported with its input.

import CommandParsing
import Foundation
import FuzzDriver
import GatewayModel

@main enum CommandParserFuzz {
    static func main() { fuzzMain(fuzzOne) }
}

let lock = Device(vendorID: "demo", vendorDeviceID: "lock", name: "Lock", type: .lock, keys: ["lock", "battery"])
let light = Device(vendorID: "demo", vendorDeviceID: "light", name: "Light", type: .light, keys: ["state", "brightness", "color_temp_kelvin"])
let thermostat = Device(
    vendorID: "demo", vendorDeviceID: "thermostat", name: "Thermostat", type: .thermostat,
    keys: ["temperature", "target_temperature", "hvac_mode", "hvac_action"]
)
let targets: [(Device, String?)] = [
    (lock, nil), (lock, "lock"), (light, nil), (light, "state"), (light, "brightness"), (light, "color_temp"),
    (thermostat, nil), (thermostat, "hvac_mode"), (thermostat, "target_temperature"),
]
/// Codes the parser may answer with; anything else (or `internal`) is a bug.
let parserCodes: Set<GatewayError.Code> = [.invalidUTF8, .invalidJSON, .invalidPayload, .unknownKey, .readOnlyKey, .outOfRange]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    checkJSON(bytes)
    checkCommands(bytes)
    return 0
}

// MARK: StrictJSON

func checkJSON(_ bytes: [UInt8]) {
    let (result, steps) = StrictJSON.parseCountingSteps(bytes)
    // The same bound as StrictJSONTests: the work is linear in the input.
    if steps > 3 * bytes.count + 16 { violated("\(steps) steps for \(bytes.count) bytes", bytes) }
    switch result {
    case .success(let value):
        if depth(value) > StrictJSON.maxDepth { violated("accepted nesting deeper than the limit", bytes) }
        // Canonical text of the value parses back to the same value.
        let text = Array(render(value).utf8)
        guard case .success(let again) = StrictJSON.parse(text), again == value else {
            violated("round trip changed the value (\(String(decoding: text.prefix(200), as: UTF8.self)))", bytes)
        }
        if String(validating: bytes, as: UTF8.self) == nil { violated("accepted bytes that are not UTF-8", bytes) }
        // Vendor bodies go through JSONDecoder after this check: JSONValue's Decodable must read the same value.
        if let decoded = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)), decoded != value {
            violated("JSONDecoder read \(decoded), StrictJSON \(value)", bytes)
        }
    case .failure(let error):
        if error.reason.isEmpty { violated("empty reason", bytes) }
        if error.byte < 1 || error.byte > bytes.count + 1 { violated("byte \(error.byte) outside the input", bytes) }
        if (error.kind == .tooDeep) != error.reason.hasPrefix("nesting deeper than") { violated("depth reason \(error)", bytes) }
    }
}

func depth(_ value: JSONValue) -> Int {
    switch value {
    case .array(let items): 1 + (items.map(depth).max() ?? 0)
    case .object(let members): 1 + (members.values.map(depth).max() ?? 0)
    default: 0
    }
}

func render(_ value: JSONValue) -> String {
    switch value {
    case .null: "null"
    case .bool(let flag): flag ? "true" : "false"
    // Full precision (Double's shortest round-trip form); overflowed numbers stay overflowing.
    case .number(let number): number.isFinite ? "\(number)" : (number < 0 ? "-1e999" : "1e999")
    case .string(let text): JSONText.quoted(text)
    case .array(let items): "[" + items.map(render).joined(separator: ",") + "]"
    case .object(let members): "{" + members.map { JSONText.quoted($0.key) + ":" + render($0.value) }.joined(separator: ",") + "}"
    }
}

// MARK: CommandParser

func checkCommands(_ bytes: [UInt8]) {
    let utf8 = String(validating: bytes, as: UTF8.self)
    for (device, key) in targets {
        switch CommandParser.parse(payload: bytes, key: key, device: device, current: DeviceState()) {
        case .success(let changes):
            checkAccepted(changes, bytes: bytes, text: utf8, device: device, key: key)
        case .failure(let error):
            if !parserCodes.contains(error.code) { violated("unexpected code \(error.code.rawValue)", bytes) }
            if error.message.isEmpty || error.suggestion.isEmpty { violated("error without a readable reason", bytes) }
            if utf8 == nil, error.code != .invalidUTF8 { violated("non-UTF-8 reported as \(error.code.rawValue)", bytes) }
        }
    }
}

func checkAccepted(_ changes: [String: StateValue], bytes: [UInt8], text: String?, device: Device, key: String?) {
    guard let text else { violated("accepted bytes that are not UTF-8", bytes) }
    if changes.isEmpty { violated("accepted with no changes", bytes) }
    // No writable key takes free text, so an accepted command is ASCII only: no U+200B, U+00A0,
    // Kelvin sign or any other look-alike can be part of one.
    if bytes.contains(where: { $0 >= 0x80 }) { violated("accepted a non-ASCII payload", bytes) }
    for (name, value) in changes {
        guard device.keys.contains(name), let spec = StateKeys.spec(name), spec.writable else { violated("accepted key \(name)", bytes) }
        switch spec.kind {
        case .enumeration(let reported):
            // Command words (LOCK/UNLOCK) where the key has them, else the reported words (heat/cool);
            // TOGGLE never comes out: it is resolved against the current state.
            let words = spec.commands.isEmpty ? reported : spec.commands.filter { $0 != "TOGGLE" }
            guard let word = value.string, words.contains(word) else {
                violated("\(name) = \(value) is not one of its words", bytes)
            }
        case .number(let low, let high):
            guard let number = value.number, number.isFinite, number >= (low ?? -.infinity), number <= (high ?? .infinity) else {
                violated("\(name) = \(value) outside its range", bytes)
            }
        default:
            break
        }
    }
    // A lock command is exactly LOCK or UNLOCK, and nothing else rides along.
    if device.id == lock.id {
        guard changes.count == 1, let word = changes["lock"]?.string, word == "LOCK" || word == "UNLOCK" else {
            violated("lock accepted \(changes)", bytes)
        }
    }
    // A bare word (not JSON) matches only after trimming ASCII whitespace, case-insensitively in ASCII.
    let trimmed = ASCIIText.trimmed(text)
    if case .failure = StrictJSON.parse(bytes) {
        guard let upper = ASCIIText.uppercased(trimmed) else { violated("bare non-ASCII word accepted", bytes) }
        let accepted = changes.values.compactMap(\.string).map { $0.uppercased() }
        let toggled = upper == "TOGGLE" && accepted == ["ON"]
        if accepted != [upper], !toggled { violated("bare \(upper) became \(changes)", bytes) }
    }
}
