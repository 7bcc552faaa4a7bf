import CommandParsing
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

extension Commands {
    /// `batch`: `{"commands":[{"device":"demo_light","set":{"state":"ON"}}, …]}`. Every item is
    /// validated on its own and runs through the outbox like a `/set`; the response lists each result.
    /// `finished` hears the response's data too (a scene publishes it as an event).
    package func batch(_ body: [String: JSONValue], reply: Reply, context: JSON, finished: (@GatewayActor (JSON) -> Void)? = nil) {
        guard case .array(let items)? = body["commands"], !items.isEmpty, items.count <= 500 else {
            return fail(.invalidPayload("batch needs {\"commands\":[{\"device\":\"<id>\",\"set\":{…}}, …]} with 1 to 500 items"),
                        device: nil, context: context, reply: reply)
        }
        var jobs: [(index: Int, job: CommandJob)] = []
        var results: [Int: JSON] = [:]
        let requestTag = UUID.random().uuidString
        for (index, item) in items.enumerated() {
            guard case .string(let rawID)? = item["device"], case .object(let set)? = item["set"] else {
                results[index] = itemResult(nil, .invalidPayload("each item needs \"device\" and a \"set\" object"))
                continue
            }
            guard let id = DeviceID(validating: rawID), let device = hub.devices[id] else {
                results[index] = itemResult(rawID, .unknownDevice(rawID))
                continue
            }
            let payload = Array(JSONValue.object(set).render().utf8)
            switch CommandParser.parse(payload: payload, key: nil, device: device, current: hub.states[id] ?? DeviceState()) {
            case .failure(let error):
                results[index] = itemResult(rawID, error)
            case .success(let changes):
                var job = CommandJob(command: hub.makeCommand(for: device, changes: changes), reply: Reply())
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
        hub.tasks.spawn { [self] in
            var received = 0
            if expected > 0 {
                for await outcome in outcomes {
                    results[outcome.index] = itemResult(outcome.device, outcome.error)
                    received += 1
                    if received == expected { break }
                }
            }
            let ordered = (0..<items.count).map { results[$0] ?? .null }
            let failed = ordered.filter { $0 != .null && $0.isError }.count
            // The batch itself was carried out: `status` is ok and each item says how it went.
            let data: JSON = ["results": .array(ordered), "failed": .number(Double(failed))]
            respond(reply, status: "ok", data: data, error: nil)
            finished?(data)
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

    package nonisolated func itemResult(_ device: String?, _ error: GatewayError?) -> JSON {
        var object: [String: JSON] = ["status": .string(error == nil ? "ok" : "error")]
        if let device { object["device"] = .string(device) }
        if let error { object["error"] = .object(error.jsonObject.mapValues(JSON.string)) }
        return .object(object)
    }
}

extension JSON {
    package var isError: Bool {
        if case .object(let members) = self, members["status"] == .string("error") { return true }
        return false
    }
}
