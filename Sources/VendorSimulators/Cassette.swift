import Foundation
import SimulatorKit
import Yams

/// A VCR cassette (the YAML that Python's vcrpy records): each interaction's request method and URI and the
/// response's status, headers and body, replayed unchanged by the simulators.
public struct Cassette: Sendable {
    public struct Interaction: Sendable {
        public var method: String
        public var uri: String
        public var status: Int
        public var headers: [String: String]
        public var body: String

        /// The URI's host (`awair-elem-1419e1.local`).
        public var host: String {
            let rest = uri.split(separator: "://", maxSplits: 1).last.map(String.init) ?? uri
            return String(rest.prefix { $0 != "/" && $0 != ":" })
        }

        /// The URI's path and query (`/v1/users/self?x=1`).
        public var target: String {
            let rest = uri.split(separator: "://", maxSplits: 1).last.map(String.init) ?? uri
            guard let slash = rest.firstIndex(of: "/") else { return "/" }
            return String(rest[slash...])
        }
    }

    public var interactions: [Interaction]

    /// Reads a cassette file; throws `SimulatorError` when it is not one.
    public init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SimulatorError(code: "sim.fixture_missing", message: "cannot read \(path)")
        }
        guard let root = try Yams.load(yaml: String(decoding: data, as: UTF8.self)) as? [String: Any],
              let list = root["interactions"] as? [[String: Any]] else {
            throw SimulatorError(code: "sim.fixture_invalid", message: "\(path) is not a VCR cassette")
        }
        interactions = list.compactMap { entry in
            guard let request = entry["request"] as? [String: Any], let response = entry["response"] as? [String: Any],
                  let method = request["method"] as? String, let uri = request["uri"] as? String else { return nil }
            let status = (response["status"] as? [String: Any])?["code"] as? Int ?? 200
            let body = (response["body"] as? [String: Any])?["string"] as? String ?? ""
            var headers: [String: String] = [:]
            for (name, value) in response["headers"] as? [String: Any] ?? [:] {
                if let text = value as? String { headers[name] = text } else if let list = value as? [String], let first = list.first { headers[name] = first }
            }
            return Interaction(method: method, uri: uri, status: status, headers: headers, body: body)
        }
    }
}
