/// Reading a device back from the JSON its synthesized `Codable` wrote (the cache stores devices that way).
/// Foundation's JSONDecoder cost ~80 k instructions a device: with 1,000 cached devices, 80 M of a cold start.
/// This reads the same document from a parsed `JSONValue`. It accepts only what the synthesized decoder accepts
/// (same keys, same types, `null` as absent for optionals) and returns nil for anything else, so a caller can
/// fall back to JSONDecoder and never decode differently.
extension Device {
    public init?(codableJSON json: JSONValue) {
        guard case .object(let fields) = json,
              case .string(let rawID)? = fields["id"], let id = DeviceID(validating: rawID),
              case .string(let vendorID)? = fields["vendorID"],
              case .string(let vendorDeviceID)? = fields["vendorDeviceID"],
              case .string(let name)? = fields["name"],
              case .string(let typeName)? = fields["type"], let type = DeviceType(rawValue: typeName),
              let keys = Self.strings(fields["keys"])
        else { return nil }
        guard let manufacturer = Self.optionalString(fields["manufacturer"]),
              let model = Self.optionalString(fields["model"]),
              let room = Self.optionalString(fields["room"]),
              let swVersion = Self.optionalString(fields["swVersion"]),
              let serialNumber = Self.optionalString(fields["serialNumber"]),
              let writable = Self.optional(fields["writableKeys"], Self.strings),
              let eventTypes = Self.optional(fields["eventTypes"], Self.strings),
              let via = Self.optional(fields["viaDevice"], { value in value?.string.flatMap(DeviceID.init(validating:)) }),
              let limits = Self.optional(fields["limits"], Self.limits)
        else { return nil }
        self.init(vendorID: vendorID, vendorDeviceID: vendorDeviceID, name: name, type: type, manufacturer: manufacturer,
                  model: model, room: room, swVersion: swVersion, serialNumber: serialNumber,
                  writableKeys: writable.map { Set($0) }, keys: keys, eventTypes: eventTypes, viaDevice: via, limits: limits)
        // The stored id is kept as stored (the synthesized decoder does not re-derive it).
        self.id = id
    }

    /// `.some(nil)` when absent or null, `.some(value)` when it reads, nil when it is present but wrong.
    private static func optional<T>(_ value: JSONValue?, _ read: (JSONValue?) -> T?) -> T?? {
        guard let value, value != .null else { return .some(nil) }
        guard let read = read(value) else { return nil }
        return .some(read)
    }

    private static func optionalString(_ value: JSONValue?) -> String?? {
        optional(value) { $0?.string }
    }

    private static func strings(_ value: JSONValue?) -> [String]? {
        guard case .array(let items)? = value else { return nil }
        var out: [String] = []
        out.reserveCapacity(items.count)
        for item in items {
            guard case .string(let text) = item else { return nil }
            out.append(text)
        }
        return out
    }

    private static func limits(_ value: JSONValue?) -> [String: KeyLimits]? {
        guard case .object(let members)? = value else { return nil }
        var out: [String: KeyLimits] = [:]
        for (key, member) in members {
            guard case .object(let fields) = member,
                  let low = optional(fields["min"], { $0?.number }),
                  let high = optional(fields["max"], { $0?.number }),
                  let options = optional(fields["options"], strings)
            else { return nil }
            out[key] = KeyLimits(min: low, max: high, options: options)
        }
        return out
    }
}
