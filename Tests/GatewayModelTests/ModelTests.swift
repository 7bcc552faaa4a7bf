import Foundation
import GatewayModel
import Testing

@Suite struct DeviceIDTests {
    @Test func slugLowercasesAndReplacesForeignCharacters() {
        #expect(DeviceID(vendorInstance: "Demo", vendorDeviceID: "Light 1/ä#+").rawValue == "demo_light_1____")
        #expect(DeviceID(vendorInstance: "consciousness", vendorDeviceID: "lights-kitchen").rawValue == "consciousness_lights-kitchen")
    }

    @Test func validatingRejectsNonSlugs() {
        #expect(DeviceID(validating: "demo_light") != nil)
        #expect(DeviceID(validating: "Demo_Light") == nil)
        #expect(DeviceID(validating: "a/b") == nil)
        #expect(DeviceID(validating: "") == nil)
        #expect(DeviceID(validating: String(repeating: "a", count: 200)) == nil)
    }
}

@Suite struct TimeAndJSONTests {
    @Test func isoFormatIsUTCWithMilliseconds() {
        #expect(ISOTime.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: 1_795_000_000.25)) == "2026-11-18T11:06:40.250Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: -1.5)) == "1969-12-31T23:59:58.500Z")
    }

    @Test func isoParseRoundTripsAndHandlesZones() throws {
        let date = Date(timeIntervalSince1970: 1_795_000_000.125)
        #expect(ISOTime.parse(ISOTime.format(date)) == date)
        #expect(ISOTime.parse("2026-11-21T11:35:09+01:00") == ISOTime.parse("2026-11-21T10:35:09Z"))
        // The consciousness backend sends local time without a zone; it parses as UTC by default.
        #expect(ISOTime.parse("2026-11-21T11:35:09.448298") != nil)
        #expect(ISOTime.parse("yesterday") == nil)
        #expect(ISOTime.parse("2026-13-01T00:00:00Z") == nil)
    }

    @Test func jsonTextEscapesAndSortsKeys() {
        let text = JSONText.object(["b": .number(1.5), "a": .string("x\"y\n"), "c": .bool(true), "d": .number(40)])
        #expect(text == #"{"a":"x\"y\n","b":1.5,"c":true,"d":40}"#)
        #expect(JSONText.number(.nan) == "null")
        #expect(JSONText.number(0.1 + 0.2) == "0.3")
        #expect(JSONText.quoted("\u{01}") == #""\u0001""#)
    }
}

@Suite struct StateKeyRegistryTests {
    @Test func everyKeyHasOneSpecAndCountersAreKWhOrVolumes() {
        #expect(Set(StateKeys.all.map(\.name)).count == StateKeys.all.count)
        for spec in StateKeys.all where spec.series == .counter {
            #expect(["kWh", "L", "m³"].contains(spec.unit ?? ""), "counter \(spec.name) has unit \(spec.unit ?? "none")")
        }
        #expect(StateKeys.spec("brightness")?.unit == "%")
        #expect(StateKeys.spec("color_temp_kelvin")?.unit == "K")
    }

    @Test func stateMergeKeepsOldKeysAndClearsStale() {
        var state = DeviceState(values: ["a": .number(1), "b": .number(2)], lastSeen: Date(timeIntervalSince1970: 10), stale: true)
        state.merge(["b": .number(3)], observedAt: Date(timeIntervalSince1970: 20))
        #expect(state.values == ["a": .number(1), "b": .number(3)])
        #expect(state.lastSeen == Date(timeIntervalSince1970: 20))
        #expect(!state.stale)
        // An older observation does not move last_seen backwards.
        state.merge(["a": .number(5)], observedAt: Date(timeIntervalSince1970: 15))
        #expect(state.lastSeen == Date(timeIntervalSince1970: 20))
    }
}

@Suite struct NumberFormattingTests {
    @Test(arguments: [
        (0.0, "0"), (-0.0, "0"), (40, "40"), (-300, "-300"), (1.5, "1.5"), (0.05, "0.05"), (0.001, "0.001"),
        (0.0004, "0"), (-0.25, "-0.25"), (21.172, "21.172"), (4821.2004, "4821.2"), (1e20, "1e+20"), (123456789.0125, "123456789.013"),
    ] as [(Double, String)])
    func formatsWithAtMostThreeDecimals(value: Double, expected: String) {
        #expect(JSONText.number(value) == expected)
    }

    /// The formatting as it was written with strings, before the digits went straight into bytes.
    private static func reference(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        let scaled = (value * 1000).rounded()
        guard abs(scaled) < 9e15 else { return "\(value)" }
        var millis = Int64(scaled)
        if millis == 0 { return "0" }
        let negative = millis < 0
        if negative { millis = -millis }
        var fraction = millis % 1000
        var text = (negative ? "-" : "") + String(millis / 1000)
        guard fraction != 0 else { return text }
        var digits = 3
        while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
        let fractionText = String(fraction)
        text += "." + String(repeating: "0", count: digits - fractionText.count) + fractionText
        return text
    }

    @Test func bytesMatchTheStringFormattingOverManyValues() {
        var values: [Double] = [.infinity, -.infinity, 9e12, -9e12, 8_999_999_999_999.999, 0.0005, -0.0005, 1e-9, 999.9995]
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<20_000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let magnitude = Double(seed >> 11) / Double(1 << 53)
            let scale = [1e-4, 1, 100, 1e4, 1e7, 1e13][Int(seed % 6)]
            values.append((seed & 1 == 0 ? 1 : -1) * magnitude * scale)
        }
        for value in values {
            var bytes: [UInt8] = Array("x".utf8)
            JSONText.appendNumber(value, to: &bytes)
            #expect(String(decoding: bytes.dropFirst(), as: UTF8.self) == Self.reference(value), "\(value)")
        }
    }
}
