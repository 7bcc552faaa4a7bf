import VendorKit
import Yams

extension ConfigNode {
    package init(_ node: Node) {
        switch node {
        case .scalar(let scalar):
            if scalar.style == .plain, ["", "~", "null", "Null", "NULL"].contains(scalar.string) {
                self = .null
            } else {
                self = .scalar(scalar.string, line: scalar.mark.map { $0.line } ?? 0)
            }
        case .mapping(let mapping):
            self = .mapping(mapping.map { (key: $0.key.string ?? "\($0.key)", value: ConfigNode($0.value)) })
        case .sequence(let sequence):
            self = .sequence(sequence.map(ConfigNode.init))
        case .alias:
            self = .null
        }
    }
}
