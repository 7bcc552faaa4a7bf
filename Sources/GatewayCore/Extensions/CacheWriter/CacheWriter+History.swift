import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

extension CacheWriter {
    package func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON) {
        history(body, reply: reply, context: context)
    }

    /// `history`: `{"device","key","from","to","resolution":"raw"|"hourly"}` answered from the cache.
    package func history(_ body: [String: JSONValue], reply: Reply, context: JSON) {
        let store = persistence.store
        let hub = self.hub
        guard case .string(let rawID)? = body["device"] ?? body["id"], let id = DeviceID(validating: rawID) else {
            return hub.fail(.invalidPayload("history needs {\"device\":\"<device_id>\",\"key\":\"<key>\"}"), device: nil, context: context, reply: reply)
        }
        guard case .string(let key)? = body["key"], let spec = StateKeys.spec(key), spec.series != .none else {
            return hub.fail(.invalidPayload("history needs a numeric energy or environment \"key\", e.g. \"power\""), device: id, context: context, reply: reply)
        }
        let end: Date
        let start: Date
        switch (body["to"], body["from"]) {
        case (nil, _): end = hub.now()
        case (.string(let text)?, _):
            guard let parsed = ISOTime.parse(text) else { return hub.fail(.invalidPayload("\"to\" must be an ISO 8601 time"), device: id, context: context, reply: reply) }
            end = parsed
        default: return hub.fail(.invalidPayload("\"to\" must be an ISO 8601 time"), device: id, context: context, reply: reply)
        }
        switch body["from"] {
        case nil: start = end.addingTimeInterval(-86_400)
        case .string(let text)?:
            guard let parsed = ISOTime.parse(text) else { return hub.fail(.invalidPayload("\"from\" must be an ISO 8601 time"), device: id, context: context, reply: reply) }
            start = parsed
        default: return hub.fail(.invalidPayload("\"from\" must be an ISO 8601 time"), device: id, context: context, reply: reply)
        }
        guard start <= end else { return hub.fail(.invalidPayload("\"from\" is after \"to\""), device: id, context: context, reply: reply) }
        let resolution: HistoryResolution
        switch body["resolution"] {
        case nil, .string("raw")?: resolution = .raw
        case .string("hourly")?: resolution = .hourly
        default: return hub.fail(.invalidPayload("\"resolution\" is \"raw\" or \"hourly\""), device: id, context: context, reply: reply)
        }
        let limit = 10_000
        hub.tasks.spawn {
            do {
                let points = try await store.runReading {
                    try $0.history(deviceID: id.rawValue, key: key, from: start.timeIntervalSince1970, to: end.timeIntervalSince1970, resolution: resolution)
                }
                guard points.count <= limit else {
                    return hub.fail(.invalidPayload("\(points.count) points is more than \(limit); ask for a shorter range or \"resolution\":\"hourly\""),
                                     device: id, context: context, reply: reply)
                }
                let rendered: [JSON] = points.map { point in
                    let time = JSON.string(ISOTime.format(Date(timeIntervalSince1970: point.time)))
                    switch resolution {
                    case .raw: return ["time": time, "value": .number(point.value)]
                    case .hourly:
                        var object: [String: JSON] = ["time": time, "min": .number(point.min), "max": .number(point.max), "avg": .number(point.avg),
                                                      "last": .number(point.last), "count": .number(Double(point.count))]
                        if let sum = point.sum { object["sum"] = .number(sum) }
                        return .object(object)
                    }
                }
                hub.respond(reply, status: "ok", data: [
                    "device": .string(id.rawValue), "key": .string(key), "unit": .optional(spec.unit),
                    "resolution": .string(resolution == .raw ? "raw" : "hourly"),
                    "from": .string(ISOTime.format(start)), "to": .string(ISOTime.format(end)), "points": .array(rendered),
                ], error: nil)
            } catch {
                hub.fail(GatewayError(.internal, message: "history query failed: \(error)"), device: id, context: context, reply: reply)
            }
        }
    }
}
