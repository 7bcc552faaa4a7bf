import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The names a request may use to reach this listener. A browser that a hostile page re-resolved to the box
/// (DNS rebinding) still sends the attacker's name in `Host`: serving only the box's own names and addresses
/// makes such a page cross-origin again, so it can neither read the API nor switch a device.
package struct HostAllowList: Sendable {
    /// Lower-cased names and address literals (IPv6 without brackets).
    private let fixed: Set<String>

    /// The listener's address, loopback names, the machine's host name (and `<name>.local`), its interface
    /// addresses at start, and `http.allowed_hosts`.
    package init(settings: HTTPSettings, hostName: String? = HostAllowList.machineHostName(), interfaceAddresses: [String] = HostAllowList.interfaceAddresses()) {
        var names: Set<String> = ["localhost", "127.0.0.1", "::1"]
        let listen = settings.host.lowercased()
        if !["0.0.0.0", "::", "*", ""].contains(listen) { names.insert(listen) }
        if let hostName = hostName?.lowercased(), !hostName.isEmpty {
            names.insert(hostName)
            // Short name → mDNS name, and the FQDN's first label (`box.lan` → `box`).
            if let dot = hostName.firstIndex(of: ".") { names.insert(String(hostName[..<dot])) } else { names.insert(hostName + ".local") }
        }
        for address in interfaceAddresses { names.insert(address.lowercased()) }
        for allowed in settings.allowedHosts { names.insert(Self.hostPart(of: allowed.lowercased())) }
        fixed = names
    }

    /// True when `authority` (`Host` value, `host[:port]`) names this listener. Addresses are checked again
    /// against the current interfaces on a miss (DHCP may have given the box a new one since start).
    package func allows(authority: String) -> Bool {
        let host = Self.hostPart(of: authority.lowercased())
        if fixed.contains(host) { return true }
        // 127.0.0.0/8 is all loopback.
        if host.hasPrefix("127."), Self.isIPv4(host) { return true }
        if Self.isIPv4(host) || host.contains(":") { return Self.interfaceAddresses().contains { $0.lowercased() == host } }
        return false
    }

    /// `host[:port]` or `[v6][:port]` → host (v6 without brackets).
    package static func hostPart(of authority: String) -> String {
        var text = Substring(authority)
        if text.hasSuffix(".") { text = text.dropLast() }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return String(text) }
            return String(text[text.index(after: text.startIndex)..<close])
        }
        // One colon: a port; several: a bare IPv6 literal.
        if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") { text = text[..<colon] }
        if text.hasSuffix(".") { text = text.dropLast() }
        return String(text)
    }

    /// The port of `host:port` or `[v6]:port`, nil when there is none.
    package static func port(of authority: String) -> Int? {
        let afterHost: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            afterHost = authority[authority.index(after: close)...]
        } else {
            guard authority.filter({ $0 == ":" }).count == 1, let colon = authority.firstIndex(of: ":") else { return nil }
            afterHost = authority[colon...]
        }
        guard afterHost.hasPrefix(":") else { return nil }
        return Int(afterHost.dropFirst()).flatMap { (0...65535).contains($0) ? $0 : nil }
    }

    private static func isIPv4(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && UInt8(part) != nil }
    }

    package static func machineHostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// Every address of every interface, as text (IPv6 without zone).
    package static func interfaceAddresses() -> [String] {
        var head: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&head) == 0, let first = head else { return [] }
        defer { freeifaddrs(head) }
        var addresses: [String] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr else { continue }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { socket in
                    var value = socket.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &value, &text, socklen_t(text.count))
                }
            case AF_INET6:
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { socket in
                    var value = socket.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &value, &text, socklen_t(text.count))
                }
            default:
                continue
            }
            let string = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !string.isEmpty { addresses.append(string) }
        }
        return addresses
    }
}

/// First on every route (before authentication, so a rebinding page learns nothing, not even that a password
/// is asked): refuses a `Host` that does not name this listener (421), and a state-changing request whose
/// `Origin` is another site (403). A request without `Host` (HTTP/1.0) cannot come from a browser and is served.
package struct HostGuardMiddleware<Context: RequestContext>: RouterMiddleware {
    package let hosts: HostAllowList

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let authority = request.head.authority
        if let authority, !hosts.allows(authority: authority) {
            return HTTPGuardResponse.error(
                .misdirectedRequest, code: "host_not_allowed",
                message: "this gateway does not answer to the name '\(HTTPGuardResponse.clip(authority))'; add it to http.allowed_hosts if it is yours")
        }
        if ![.get, .head, .options].contains(request.method) {
            if let origin = request.headers[.origin], !Self.sameSite(origin: origin, authority: authority, hosts: hosts) {
                return HTTPGuardResponse.error(
                    .forbidden, code: "origin_not_allowed",
                    message: "requests that change something are accepted only from this gateway's own page (Origin '\(HTTPGuardResponse.clip(origin))')")
            }
        }
        return try await next(request, context)
    }

    /// The page's own origin: an allowed host, the same name the request was sent to.
    package static func sameSite(origin: String, authority: String?, hosts: HostAllowList) -> Bool {
        // `null` (sandboxed frames, file: pages) and anything that is not http(s)://authority is refused.
        let lowered = origin.lowercased()
        let rest: Substring
        let defaultPort: Int
        if lowered.hasPrefix("http://") {
            (rest, defaultPort) = (lowered.dropFirst(7), 80)
        } else if lowered.hasPrefix("https://") {
            (rest, defaultPort) = (lowered.dropFirst(8), 443)
        } else {
            return false
        }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return false }
        guard hosts.allows(authority: String(rest)) else { return false }
        guard let authority else { return true }
        let target = authority.lowercased()
        guard HostAllowList.hostPart(of: String(rest)) == HostAllowList.hostPart(of: target) else { return false }
        // Same port too (another web server on the box is another site). A Host without a port came through the
        // scheme's default port, as seen by the browser (a TLS proxy in front: 443).
        let originPort = HostAllowList.port(of: String(rest)) ?? defaultPort
        return HostAllowList.port(of: target).map { $0 == originPort } ?? (originPort == defaultPort)
    }
}

/// Headers on every answer: never framed (clickjacking: a hidden frame over a decoy button), never sniffed.
package struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        if let name = HTTPGuardResponse.xFrameOptions { response.headers[name] = "DENY" }
        if let name = HTTPGuardResponse.referrerPolicy { response.headers[name] = "no-referrer" }
        response.headers[.xContentTypeOptions] = "nosniff"
        if let policy = response.headers[.contentSecurityPolicy] {
            if !policy.contains("frame-ancestors") { response.headers[.contentSecurityPolicy] = policy + "; frame-ancestors 'none'" }
        } else {
            response.headers[.contentSecurityPolicy] = "frame-ancestors 'none'"
        }
        return response
    }
}

package enum HTTPGuardResponse {
    /// (Valid names: the optionals are never nil.)
    package static let xFrameOptions = HTTPField.Name("X-Frame-Options")
    package static let referrerPolicy = HTTPField.Name("Referrer-Policy")
    package static func error(_ status: HTTPResponse.Status, code: String, message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        let body = #"{"error":{"code":"\#(code)","message":"\#(escape(message))"}}"#
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }

    /// At most 64 printable characters of a client-chosen value, for a message.
    package static func clip(_ text: String) -> String {
        String(text.unicodeScalars.prefix(64).filter { $0.value >= 0x20 && $0.value < 0x7F }.map(Character.init))
    }

    private static func escape(_ text: String) -> String {
        text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"")
    }
}

/// Counts the listener's open connections and closes each one beyond `limit` as soon as it is accepted, so
/// clients that never finish a request cannot take the descriptors MQTT and the vendors need. The idle timeout
/// (Hummingbird's, which also runs while a request's head is still arriving) closes the ones that stall.
package final class ConnectionLimit: Sendable {
    package let limit: Int
    private let open = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)

    package init(limit: Int) { self.limit = limit }

    package var openConnections: Int { open.load(ordering: .relaxed) }
    package var refusedConnections: Int { refused.load(ordering: .relaxed) }

    package func handler() -> any RemovableChannelHandler { Handler(limit: self) }

    /// True when the new connection fits.
    fileprivate func enter() -> Bool {
        let now = open.wrappingAdd(1, ordering: .relaxed).newValue
        if now > limit {
            refused.wrappingAdd(1, ordering: .relaxed)
            return false
        }
        return true
    }

    fileprivate func leave() { open.wrappingSubtract(1, ordering: .relaxed) }

    /// Passes every read on untouched: it only sees the connection arrive and go.
    private final class Handler: ChannelInboundHandler, RemovableChannelHandler {
        package typealias InboundIn = Any
        package let limit: ConnectionLimit
        private var counted = false

        package init(limit: ConnectionLimit) { self.limit = limit }

        package func handlerAdded(context: ChannelHandlerContext) {
            counted = true
            if !limit.enter() { context.close(promise: nil) }
        }

        package func handlerRemoved(context: ChannelHandlerContext) {
            if counted { limit.leave(); counted = false }
        }
    }
}
