#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// A scene (seed 004's HomeScene): actions on devices of any vendors, run together with
/// `<base>/scene/<id>/set` `ON` or the `scene/run` request.
public struct Scene: Sendable, Hashable {
    public struct Action: Sendable, Hashable {
        /// The device id, as in `<base>/device/<id>`.
        public var device: String
        /// What to set, as a `/set` payload takes it (`{"state":"ON","brightness":40}`).
        public var set: [String: JSONValue]

        public init(device: String, set: [String: JSONValue]) {
            self.device = device
            self.set = set
        }
    }

    public var id: String
    public var name: String
    public var actions: [Action]
    /// Defined in the config file (not removable by request); else added by `scene/add` and kept in the cache.
    public var fromConfig: Bool

    public init(id: String, name: String, actions: [Action], fromConfig: Bool) {
        self.id = id
        self.name = name
        self.actions = actions
        self.fromConfig = fromConfig
    }

    /// Bounds for what a request may add (the cache, the broker's retained discovery and memory grow with
    /// them): a scene name, its actions, each action's keys, the scene's JSON, and the number of scenes.
    public static let maxActions = 100
    public static let maxNameCharacters = 128
    public static let maxKeysPerAction = 32
    public static let maxEncodedBytes = 16 * 1024
    public static let maxScenes = 256

    /// Ids are topic segments: lower-case letters, digits, `_` and `-`, 1 to 64 characters.
    public static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 64 && id.allSatisfy { ($0.isLetter && $0.isLowercase && $0.isASCII) || $0.isNumber || $0 == "_" || $0 == "-" }
    }

    /// `{"id","name","actions":[{"device","set":{…}}]}` as `scene/add` takes it and the cache keeps it.
    public var json: JSON {
        [
            "id": .string(id), "name": .string(name),
            "actions": .array(actions.map { ["device": .string($0.device), "set": JSONValue.object($0.set)] }),
        ]
    }

    /// A scene from its JSON; the error says what is wrong.
    public static func parse(_ object: [String: JSONValue], fromConfig: Bool = false) -> Result<Scene, GatewayError> {
        guard case .string(let id)? = object["id"], isValidID(id) else {
            return .failure(.invalidPayload("a scene needs an \"id\" of lower-case letters, digits, '_' or '-' (at most 64)"))
        }
        var name = id
        if case .string(let given)? = object["name"], !given.isEmpty { name = given }
        guard name.count <= maxNameCharacters, name.utf8.count <= 4 * maxNameCharacters else {
            return .failure(GatewayError(.payloadTooLarge, message: "A scene name may have at most \(maxNameCharacters) characters (this one has \(name.count)).",
                                         suggestion: "Use a shorter name."))
        }
        guard case .array(let items)? = object["actions"], !items.isEmpty, items.count <= maxActions else {
            return .failure(.invalidPayload("a scene needs \"actions\": [{\"device\":\"<id>\",\"set\":{…}}, …] with 1 to \(maxActions) items"))
        }
        var actions: [Action] = []
        for item in items {
            guard case .string(let device)? = item["device"], case .object(let set)? = item["set"], !set.isEmpty else {
                return .failure(.invalidPayload("each scene action needs \"device\" and a non-empty \"set\" object"))
            }
            guard device.utf8.count <= 128, set.count <= maxKeysPerAction else {
                return .failure(.invalidPayload("a scene action names a device id of at most 128 bytes and sets at most \(maxKeysPerAction) keys"))
            }
            actions.append(Action(device: device, set: set))
        }
        let scene = Scene(id: id, name: name, actions: actions, fromConfig: fromConfig)
        let size = scene.json.render().utf8.count
        guard size <= maxEncodedBytes else {
            return .failure(GatewayError(.payloadTooLarge, message: "The scene is \(size) bytes as JSON; at most \(maxEncodedBytes) are kept.",
                                         suggestion: "Split it into smaller scenes, or set only the keys that change."))
        }
        return .success(scene)
    }
}

extension ConfigReader {
    /// `scenes: [{id, name, actions: [{device, set: {key: value}}]}]`. YAML scalars become JSON as a `/set` would
    /// read them: `true`/`false`, numbers, else strings (`ON`).
    package mutating func scenes(_ node: ConfigNode?) -> [Scene] {
        guard let node else { return [] }
        guard case .sequence(let items) = node else {
            problem("scenes", "expected a list", fix: "write each scene as a '- id: …' item")
            return []
        }
        var scenes: [Scene] = []
        for (index, item) in items.enumerated() {
            let path = "scenes[\(index)]"
            guard let mapping = mapping(item, at: path, required: true) else { continue }
            rejectUnknownKeys(in: mapping, at: path, allowed: ["id", "name", "actions"])
            guard case .object(let object) = Self.json(mapping) else { continue }
            switch Scene.parse(object, fromConfig: true) {
            case .success(let scene):
                if scenes.contains(where: { $0.id == scene.id }) {
                    problem("\(path).id", "'\(scene.id)' is used twice", fix: "give each scene its own id")
                } else {
                    scenes.append(scene)
                }
            case .failure(let error):
                problem(path, error.message, fix: "see docs/scenes.md")
            }
        }
        return scenes
    }

    package static func json(_ node: ConfigNode) -> JSONValue {
        switch node {
        case .scalar(let text, _):
            if text == "true" { return .bool(true) }
            if text == "false" { return .bool(false) }
            if let number = Double(text), number.isFinite { return .number(number) }
            return .string(text)
        case .mapping(let pairs):
            return .object(Dictionary(pairs.map { ($0.key, json($0.value)) }, uniquingKeysWith: { $1 }))
        case .sequence(let items):
            return .array(items.map(json))
        default:
            return .null
        }
    }
}
