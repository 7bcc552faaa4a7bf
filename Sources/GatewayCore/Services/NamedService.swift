import ServiceLifecycle

/// A service that names itself by its type. ServiceGroup names every service with `"\(service)"`; without a
/// description that reflects every stored property (the whole config for the gateway service, through Mirror and a
/// protocol-conformance scan per type): ~90 M instructions of a cold start in the static build. `_typeName` reads
/// the name from the type's metadata, with no conformance lookup.
public protocol NamedService: Service, CustomStringConvertible {}

extension NamedService {
    public var description: String { _typeName(Self.self, qualified: false) }
}
