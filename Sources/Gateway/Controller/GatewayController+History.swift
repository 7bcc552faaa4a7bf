import Cache
import Foundation
import GatewayModel

extension GatewayController {
    /// `history`: `{"device","key","from","to","resolution":"raw"|"hourly"}` answered from the cache.
    func history(_ body: [String: JSONValue], reply: Reply, context: JSON) {
        guard let store = persistence?.store else {
            return fail(GatewayError(.invalidPayload, message: "History needs the SQLite cache.", suggestion: "Set storage.path in the configuration."),
                        device: nil, context: context, reply: reply)
        }
        guard case .string(let rawID)? = body["device"] ?? body["id"], let id = DeviceID(validating: rawID) else {
            return fail(.invalidPayload("history needs {\"device\":\"<device_id>\",\"key\":\"<key>\"}"), device: nil, context: context, reply: reply)
        }
        guard case .string(let key)? = body["key"], let spec = StateKeys.spec(key), spec.series != .none else {
            return fail(.invalidPayload("history needs a numeric energy or environment \"key\", e.g. \"power\""), device: id, context: context, reply: reply)
        }
        let end: Date
        let start: Date
        switch (body["to"], body["from"]) {
        case (nil, _): end = now()
        case (.string(let text)?, _):
            guard let parsed = ISOTime.parse(text) else { return fail(.invalidPayload("\"to\" must be an ISO 8601 time"), device: id, context: context, reply: reply) }
            end = parsed
        default: return fail(.invalidPayload("\"to\" must be an ISO 8601 time"), device: id, context: context, reply: reply)
        }
        switch body["from"] {
        case nil: start = end.addingTimeInterval(-86_400)
        case .string(let text)?:
            guard let parsed = ISOTime.parse(text) else { return fail(.invalidPayload("\"from\" must be an ISO 8601 time"), device: id, context: context, reply: reply) }
            start = parsed
        default: return fail(.invalidPayload("\"from\" must be an ISO 8601 time"), device: id, context: context, reply: reply)
        }
        guard start <= end else { return fail(.invalidPayload("\"from\" is after \"to\""), device: id, context: context, reply: reply) }
        let resolution: HistoryResolution
        switch body["resolution"] {
        case nil, .string("raw")?: resolution = .raw
        case .string("hourly")?: resolution = .hourly
        default: return fail(.invalidPayload("\"resolution\" is \"raw\" or \"hourly\""), device: id, context: context, reply: reply)
        }
        let limit = 10_000
        Task {
            do {
                let points = try await store.run {
                    try $0.history(deviceID: id.rawValue, key: key, from: start.timeIntervalSince1970, to: end.timeIntervalSince1970, resolution: resolution)
                }
                guard points.count <= limit else {
                    return self.fail(.invalidPayload("\(points.count) points is more than \(limit); ask for a shorter range or \"resolution\":\"hourly\""),
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
                self.respond(reply, status: "ok", data: [
                    "device": .string(id.rawValue), "key": .string(key), "unit": .optional(spec.unit),
                    "resolution": .string(resolution == .raw ? "raw" : "hourly"),
                    "from": .string(ISOTime.format(start)), "to": .string(ISOTime.format(end)), "points": .array(rendered),
                ], error: nil)
            } catch {
                self.fail(GatewayError(.internal, message: "history query failed: \(error)"), device: id, context: context, reply: reply)
            }
        }
    }

    /// `batch`: `{"commands":[{"device":"demo_light","set":{"state":"ON"}}, …]}`. Every item is
    /// validated on its own and runs through the outbox like a `/set`; the response lists each result.
    func batch(_ body: [String: JSONValue], reply: Reply, context: JSON) {
        guard case .array(let items)? = body["commands"], !items.isEmpty, items.count <= 500 else {
            return fail(.invalidPayload("batch needs {\"commands\":[{\"device\":\"<id>\",\"set\":{…}}, …]} with 1 to 500 items"),
                        device: nil, context: context, reply: reply)
        }
        var jobs: [(index: Int, job: CommandJob)] = []
        var results: [Int: JSON] = [:]
        let requestTag = UUID().uuidString
        for (index, item) in items.enumerated() {
            guard case .string(let rawID)? = item["device"], case .object(let set)? = item["set"] else {
                results[index] = itemResult(nil, .invalidPayload("each item needs \"device\" and a \"set\" object"))
                continue
            }
            guard let id = DeviceID(validating: rawID), let device = devices[id] else {
                results[index] = itemResult(rawID, .unknownDevice(rawID))
                continue
            }
            let payload = Array(JSON(JSONValue.object(set)).render().utf8)
            switch CommandParser.parse(payload: payload, key: nil, device: device, current: states[id] ?? DeviceState()) {
            case .failure(let error):
                results[index] = itemResult(rawID, error)
            case .success(let changes):
                let issued = now()
                let command = DeviceCommand(
                    id: UUID().uuidString.lowercased(), device: id, vendorID: device.vendorID, vendorDeviceID: device.vendorDeviceID,
                    changes: changes, issuedAt: issued, expiresAt: issued.addingTimeInterval(config.commands.ttl(for: device.type)))
                var job = CommandJob(command: command, reply: Reply())
                job.requestTag = requestTag
                jobs.append((index, job))
            }
        }
        groupForVendorCalls(&jobs)

        // Completions arrive in any order; the response goes out when every accepted item has one.
        let (outcomes, report) = AsyncStream.makeStream(of: (index: Int, device: String, error: GatewayError?).self)
        for position in jobs.indices {
            let (index, device) = (jobs[position].index, jobs[position].job.command.device.rawValue)
            jobs[position].job.completion = { report.yield((index, device, $0)) }
        }
        // One call, in item order: items for the same device keep their order in its lane.
        enqueue(jobs.map(\.job))
        let expected = jobs.count
        Task {
            var received = 0
            if expected > 0 {
                for await outcome in outcomes {
                    results[outcome.index] = self.itemResult(outcome.device, outcome.error)
                    received += 1
                    if received == expected { break }
                }
            }
            let ordered = (0..<items.count).map { results[$0] ?? .null }
            let failed = ordered.filter { $0 != .null && $0.isError }.count
            // The batch itself was carried out: `status` is ok and each item says how it went.
            self.respond(reply, status: "ok", data: ["results": .array(ordered), "failed": .number(Double(failed))], error: nil)
        }
    }

    /// Puts the first item for each device of a vendor with two or more devices in the batch into one
    /// batch group, so they leave in one vendor call. Later items for an already-grouped device run
    /// after it, on their own, in order.
    private func groupForVendorCalls(_ jobs: inout [(index: Int, job: CommandJob)]) {
        var firstPerDevice: [String: [Int]] = [:]
        var seen: Set<DeviceID> = []
        for (position, entry) in jobs.enumerated() where seen.insert(entry.job.command.device).inserted {
            firstPerDevice[entry.job.command.vendorID, default: []].append(position)
        }
        for (vendorID, positions) in firstPerDevice where positions.count > 1 {
            let key = openBatchGroup(vendorID: vendorID, expected: positions.count)
            for position in positions { jobs[position].job.batchGroup = key }
        }
    }

    nonisolated func itemResult(_ device: String?, _ error: GatewayError?) -> JSON {
        var object: [String: JSON] = ["status": .string(error == nil ? "ok" : "error")]
        if let device { object["device"] = .string(device) }
        if let error { object["error"] = .object(error.jsonObject.mapValues(JSON.string)) }
        return .object(object)
    }
}

extension JSON {
    var isError: Bool {
        if case .object(let members) = self, members["status"] == .string("error") { return true }
        return false
    }
}
