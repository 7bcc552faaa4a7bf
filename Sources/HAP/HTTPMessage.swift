/// One HTTP/1.1 message on a HAP connection: a response, an `EVENT/1.0` notification, or (on the accessory's
/// side) a request.
public struct HAPMessage: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case response(status: Int)
        case event
        case request(method: String, target: String)
    }

    public var kind: Kind
    public var headers: [Header]
    public var body: [UInt8]

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public init(kind: Kind, headers: [Header] = [], body: [UInt8] = []) {
        self.kind = kind
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }

    /// A request as HAP wants it: `Host:` always, CRLF line ends, written in one piece (some accessories fail on
    /// a request split over several TCP segments).
    public static func request(_ method: String, _ target: String, host: String, contentType: String? = nil, body: [UInt8] = []) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        if !body.isEmpty || method == "PUT" || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    /// A response or event (the accessory's side).
    public static func response(status: Int, reason: String, event: Bool = false, contentType: String? = nil, body: [UInt8] = []) -> [UInt8] {
        var head = (event ? "EVENT/1.0" : "HTTP/1.1") + " \(status) \(reason)\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }
}

/// Splits a byte stream into `HAPMessage`s: Content-Length and chunked bodies, several messages per read, a
/// message over several reads. Limits keep a broken peer from growing memory without bound.
public struct HAPMessageParser: Sendable {
    public static let maxHeaderBytes = 16 << 10
    /// The largest body accepted (`/accessories` of a large bridge is a few hundred KB).
    public var maxBodyBytes: Int
    var buffer: [UInt8] = []

    public init(maxBodyBytes: Int = 8 << 20) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// Bytes held for a message not yet complete.
    public var bufferedBytes: Int { buffer.count }

    public mutating func feed(_ bytes: [UInt8]) throws(HAPError) -> [HAPMessage] {
        buffer += bytes
        var messages: [HAPMessage] = []
        var start = 0
        while let (message, end) = try parseOne(from: start) {
            messages.append(message)
            start = end
        }
        if start > 0 { buffer.removeFirst(start) }
        return messages
    }

    /// One message starting at `start`, and where it ends; nil while it is incomplete.
    private func parseOne(from start: Int) throws(HAPError) -> (HAPMessage, Int)? {
        guard let headEnd = find([13, 10, 13, 10], from: start) else {
            if buffer.count - start > Self.maxHeaderBytes { throw .malformed("an HTTP header is longer than \(Self.maxHeaderBytes) bytes") }
            return nil
        }
        let head = String(decoding: buffer[start..<headEnd], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { throw .malformed("an empty HTTP message") }
        let startLine = lines.removeFirst()
        let kind = try Self.kind(of: startLine)
        var headers: [HAPMessage.Header] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw .malformed("an HTTP header line without ':': \(line.prefix(80))") }
            headers.append(.init(name: String(line[..<colon]).trimmingSpaces, value: String(line[line.index(after: colon)...]).trimmingSpaces))
        }
        var message = HAPMessage(kind: kind, headers: headers)
        let bodyStart = headEnd + 4
        if message.header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            guard let (body, end) = try chunkedBody(from: bodyStart) else { return nil }
            message.body = body
            return (message, end)
        }
        var length = 0
        if let text = message.header("Content-Length") {
            guard let value = Int(text), value >= 0 else { throw .malformed("Content-Length '\(text.prefix(20))' is not a number") }
            length = value
        }
        guard length <= maxBodyBytes else { throw .malformed("a body of \(length) bytes is over the \(maxBodyBytes)-byte limit") }
        guard buffer.count - bodyStart >= length else { return nil }
        message.body = Array(buffer[bodyStart..<bodyStart + length])
        return (message, bodyStart + length)
    }

    private static func kind(of line: String) throws(HAPError) -> HAPMessage.Kind {
        let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
        guard parts.count >= 2 else { throw .malformed("a bad HTTP start line: \(line.prefix(80))") }
        if parts[0].hasPrefix("HTTP/") || parts[0] == "EVENT/1.0" {
            guard let status = Int(parts[1]), (100...999).contains(status) else { throw .malformed("a bad HTTP status in: \(line.prefix(80))") }
            return parts[0] == "EVENT/1.0" ? .event : .response(status: status)
        }
        guard parts.count == 3, parts[2].hasPrefix("HTTP/") else { throw .malformed("a bad HTTP start line: \(line.prefix(80))") }
        return .request(method: parts[0], target: parts[1])
    }

    private func chunkedBody(from start: Int) throws(HAPError) -> ([UInt8], Int)? {
        var body: [UInt8] = []
        var index = start
        while true {
            guard let lineEnd = find([13, 10], from: index) else { return nil }
            let sizeText = String(decoding: buffer[index..<lineEnd], as: UTF8.self).split(separator: ";").first.map(String.init) ?? ""
            guard let size = Int(sizeText.trimmingSpaces, radix: 16), size >= 0 else { throw .malformed("a bad chunk size '\(sizeText.prefix(20))'") }
            guard body.count + size <= maxBodyBytes else { throw .malformed("a chunked body over the \(maxBodyBytes)-byte limit") }
            let dataStart = lineEnd + 2
            if size == 0 {
                // The last chunk, then optional trailers, then an empty line.
                guard let end = find([13, 10], from: dataStart) else { return nil }
                if end == dataStart { return (body, end + 2) }
                guard let trailersEnd = find([13, 10, 13, 10], from: dataStart) else { return nil }
                return (body, trailersEnd + 4)
            }
            guard buffer.count >= dataStart + size + 2 else { return nil }
            body += buffer[dataStart..<dataStart + size]
            index = dataStart + size + 2
        }
    }

    private func find(_ pattern: [UInt8], from start: Int) -> Int? {
        guard buffer.count >= pattern.count, start <= buffer.count - pattern.count else { return nil }
        var index = start
        let last = buffer.count - pattern.count
        while index <= last {
            if buffer[index] == pattern[0] {
                var match = true
                for offset in 1..<pattern.count where buffer[index + offset] != pattern[offset] {
                    match = false
                    break
                }
                if match { return index }
            }
            index += 1
        }
        return nil
    }
}

extension String {
    var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text = text.dropFirst() }
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return String(text)
    }
}

/// What arrives on one HAP connection: plaintext until pair-verify, then encrypted frames; either way split into
/// messages. Both sides read their connection through one.
public struct HAPInbound: Sendable {
    public var parser: HAPMessageParser
    /// Set after pair-verify M4: frames are decrypted from then on.
    public var cipher: SecureChannel?

    public init(maxBodyBytes: Int = 8 << 20) {
        parser = HAPMessageParser(maxBodyBytes: maxBodyBytes)
    }

    public var isEncrypted: Bool { cipher != nil }

    /// The whole messages among `bytes` and what came before them; an error ends the connection.
    public mutating func receive(_ bytes: [UInt8]) throws(HAPError) -> [HAPMessage] {
        var plain = bytes
        if var cipher {
            plain = try cipher.open(bytes)
            self.cipher = cipher
        }
        return try parser.feed(plain)
    }
}
