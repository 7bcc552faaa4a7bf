import VendorKit
import Yams

/// Yams' node as a `ConfigNode`, the way the gateway read its config before `YAMLReader`: the reference its
/// answers are compared with.
extension ConfigNode {
    init(yams node: Node) {
        switch node {
        case .scalar(let scalar):
            if scalar.style == .plain, ["", "~", "null", "Null", "NULL"].contains(scalar.string) {
                self = .null
            } else {
                self = .scalar(scalar.string, line: scalar.mark.map { $0.line } ?? 0)
            }
        case .mapping(let mapping):
            self = .mapping(mapping.map { (key: $0.key.string ?? "\($0.key)", value: ConfigNode(yams: $0.value)) })
        case .sequence(let sequence):
            self = .sequence(sequence.map { ConfigNode(yams: $0) })
        case .alias:
            self = .null
        }
    }
}
