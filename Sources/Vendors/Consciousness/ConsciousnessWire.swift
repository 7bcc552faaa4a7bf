#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// The backend's JSON shapes (see `consciousness-backend.md`). Only this folder knows them.
/// Decoding is lenient where the seeds and the running server differ, strict where the gateway needs a value.

struct WireDevice: Decodable, Sendable {
    var id: String
    var name: String?
    var type: String?
    var status: String?
    var location: String?
    var properties: [String: JSONValue]?
    var lastSeen: String?

    enum CodingKeys: String, CodingKey {
        case id, name, type, status, location, properties
        case lastSeen = "last_seen"
    }
}

extension WireDevice {
    /// The device as `Decodable` reads it, from the strict parse's tree (the control answer's path).
    init(reading object: JSONObjectReader) throws {
        id = try object.requiredString("id")
        name = try object.string("name")
        type = try object.string("type")
        status = try object.string("status")
        location = try object.string("location")
        properties = try object.objectMembers("properties")
        lastSeen = try object.string("last_seen")
    }
}

struct WireDeviceList: Decodable, Sendable {
    var devices: [WireDevice]
}

struct WireLogin: Decodable, Sendable {
    var accessToken: String
    var expiresIn: Double?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case expiresIn = "expires_in"
    }
}

struct WireLoginRequest: Encodable {
    var username: String
    var password: String
}

/// `{"action":"turn_on","value":null}`: written directly (it is on every command's path, and `JSONEncoder`
/// costs more than the rest of the request's set-up).
struct WireControlRequest {
    var action: String

    var body: Data {
        var text = #"{"action":"#
        JSONText.appendQuoted(action, to: &text)
        text += #","value":null}"#
        return Data(text.utf8)
    }
}

struct WireControlAnswer: Decodable, Sendable {
    var status: String?
    var message: String?
    var device: WireDevice?
}

extension WireControlAnswer {
    /// The answer as `Decodable` reads it, from the strict parse's tree: it is on every command's path.
    init(json: JSONValue) throws {
        let object = try JSONObjectReader(json)
        status = try object.string("status")
        message = try object.string("message")
        device = try object.object("device").map(WireDevice.init(reading:))
    }
}

struct WireBatchRequest: Encodable {
    struct Item: Encodable {
        var deviceID: String
        var action: String

        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id"
            case action
        }
    }

    var devices: [Item]
}

struct WireBatchAnswer: Decodable, Sendable {
    struct Item: Decodable, Sendable {
        /// `device_id` as served, or `id` as in the seed documents.
        var deviceID: String?
        var status: String?
        var message: String?

        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id"
            case id, status, message, error
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            deviceID = try container.decodeIfPresent(String.self, forKey: .deviceID) ?? container.decodeIfPresent(String.self, forKey: .id)
            status = try container.decodeIfPresent(String.self, forKey: .status)
            message = try container.decodeIfPresent(String.self, forKey: .message) ?? (try? container.decodeIfPresent(String.self, forKey: .error))
        }
    }

    var results: [Item]
}

struct WireEmotion: Decodable, Sendable {
    var primary: String?
    var arousal: Double?
    var valence: Double?

    enum CodingKeys: String, CodingKey {
        case primary, arousal, valence
        case primaryEmotion = "primary_emotion"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        primary = try container.decodeIfPresent(String.self, forKey: .primary)
            ?? container.decodeIfPresent(String.self, forKey: .primaryEmotion)
        arousal = try container.decodeIfPresent(Double.self, forKey: .arousal)
        valence = try container.decodeIfPresent(Double.self, forKey: .valence)
    }
}

struct WireStatus: Decodable, Sendable {
    var status: String?
    var awarenessLevel: Double?
    var emotionalState: WireEmotion?

    enum CodingKeys: String, CodingKey {
        case status
        case awarenessLevel = "awareness_level"
        case emotionalState = "emotional_state"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        status = try container.decodeIfPresent(String.self, forKey: .status)
        awarenessLevel = try container.decodeIfPresent(Double.self, forKey: .awarenessLevel)
        // The WebSocket variant sends the emotional state as a bare word.
        emotionalState = try? container.decodeIfPresent(WireEmotion.self, forKey: .emotionalState)
    }
}

struct WireEmotions: Decodable, Sendable {
    var current: WireEmotion?
}
