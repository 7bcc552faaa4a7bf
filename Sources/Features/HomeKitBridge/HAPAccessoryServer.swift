#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HAP
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// What the HAP server asks of the accessory it serves (the bridge): its identity and pairings, its database,
/// reads and writes. Every call may come from any connection's task.
protocol HAPAccessoryDelegate: Sendable {
    var identity: AccessoryIdentity { get }
    var setupCode: String { get }
    func pairings() async -> [ControllerPairing]
    /// Stores a pairing (pair setup or Add Pairing); false when there is no room (16 pairings, as HomeKit's limit).
    func addPairing(_ pairing: ControllerPairing) async -> Bool
    func removePairing(_ id: String) async
    /// Counts one failed pair setup; returns the total so far (kept across restarts).
    func failedPairSetup() async -> Int
    func failedPairSetups() async -> Int
    /// `GET /accessories`: the whole database with values, as JSON.
    func accessoriesJSON() async -> [UInt8]
    func read(_ ids: [(aid: Int, iid: Int)]) async -> [CharacteristicValue]
    /// Writes (value items of one `PUT /characteristics`); one status per item, 0 when it was carried out.
    func write(_ items: [CharacteristicValue], session: UInt64) async -> [CharacteristicValue]
    /// Whether aid.iid exists and sends events (`ev` in its perms); nil when it does not exist.
    func notifies(aid: Int, iid: Int) async -> Bool?
    /// What `GET /characteristics` adds with `meta=1`, `perms=1`, `type=1`: the characteristic's description
    /// (`format`, `unit`, ranges, `perms`, `type`); nil when it does not exist.
    func describe(aid: Int, iid: Int) async -> [String: JSONValue]?
    func identify() async
}

/// The HomeKit Accessory Protocol over TCP, the accessory's side: pair setup (one at a time, refused while paired
/// and after 100 failed attempts), pair verify, encrypted sessions (at most `maxSessions`), `/accessories`,
/// `GET`/`PUT /characteristics` with `ev`, timed writes (`PUT /prepare`), `/pairings` for admins, and EVENT/1.0
/// notifications to the sessions that subscribed.
final class HAPAccessoryServer: Sendable {
    static let maxSessions = 16
    static let verifyWithin: Duration = .seconds(60)
    let host: String
    let port: Int
    let delegate: any HAPAccessoryDelegate
    let logger: Logger
    private let state = Mutex(State())
    /// The port actually bound (the configured one, or the one the system chose for 0).
    private let bound = Mutex<Int?>(nil)

    private struct State {
        var sessions: [UInt64: HAPServerSession] = [:]
        var nextID: UInt64 = 0
        /// The session running a pair setup: only one at a time.
        var pairSetupOwner: UInt64?
        var channel: (any Channel)?
    }

    init(host: String, port: Int, delegate: any HAPAccessoryDelegate, logger: Logger) {
        self.host = host
        self.port = port
        self.delegate = delegate
        self.logger = logger
    }

    var boundPort: Int? { bound.withLock { $0 } }
    var sessionCount: Int { state.withLock { $0.sessions.count } }

    /// Serves until cancelled.
    func run() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 32)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
            }
        bound.withLock { $0 = server.channel.localAddress?.port }
        state.withLock { $0.channel = server.channel }
        try await withTaskCancellationHandler {
            try await server.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in inbound {
                        group.addTask { await self.serve(connection) }
                    }
                }
            }
        } onCancel: {
            self.closeAll()
        }
    }

    func closeAll() {
        let (sessions, channel) = state.withLock { ($0.sessions.values.map { $0 }, $0.channel) }
        for session in sessions { session.close() }
        channel?.close(promise: nil)
    }

    /// Closes the sessions of one controller (its pairing was removed), or of every controller.
    func closeSessions(of controller: String?) {
        let sessions = state.withLock { $0.sessions.values.filter { controller == nil || $0.controller?.pairingID == controller } }
        for session in sessions { session.close() }
    }

    /// Sends changed values to every session subscribed to them (except the one whose write caused them).
    func notify(_ values: [CharacteristicValue], except origin: UInt64? = nil) {
        guard !values.isEmpty else { return }
        let sessions = state.withLock { Array($0.sessions.values) }
        for session in sessions where session.id != origin {
            let wanted = session.subscribed(values)
            guard !wanted.isEmpty else { continue }
            let items = wanted.map { JSONValue.object(["aid": .number(Double($0.aid)), "iid": .number(Double($0.iid)), "value": $0.value ?? .null]) }
            let body = Array(JSONValue.object(["characteristics": .array(items)]).render().utf8)
            session.send(HAPMessage.response(status: 200, reason: "OK", event: true, contentType: "application/hap+json", body: body))
        }
    }

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        do {
            try await connection.executeThenClose { inbound, outbound in
                let id: UInt64? = state.withLock { state in
                    guard state.sessions.count < Self.maxSessions else { return nil }
                    state.nextID += 1
                    return state.nextID
                }
                guard let id else {
                    logger.warning("homekit bridge: a connection refused, \(Self.maxSessions) sessions are open")
                    return
                }
                // Writes go to the channel directly (see `send`); the async writer stays unused until the close.
                _ = outbound
                let session = HAPServerSession(id: id, channel: connection.channel, server: self)
                state.withLock { $0.sessions[id] = session }
                // A connection that does not pair-verify within a minute is closed (idle strangers cannot hold the 16
                // slots), unless it is the one pair setup under way (a person may take a while to type the code).
                let unverified = Task {
                    while true {
                        try await Task.sleep(for: Self.verifyWithin)
                        if session.isVerified { return }
                        if self.state.withLock({ $0.pairSetupOwner }) != id { return session.close() }
                    }
                }
                defer { unverified.cancel() }
                defer {
                    state.withLock { state in
                        state.sessions[id] = nil
                        if state.pairSetupOwner == id { state.pairSetupOwner = nil }
                    }
                }
                for try await buffer in inbound {
                    let requests: [HAPMessage]
                    do { requests = try session.receive(Array(buffer.readableBytesView)) } catch {
                        logger.info("homekit bridge: session \(id) closed: \(error)")
                        return
                    }
                    for request in requests {
                        await handle(request, session: session)
                    }
                    if session.isClosed { return }
                }
            }
        } catch {
            logger.debug("homekit bridge: connection ended: \(error)")
        }
    }

    // MARK: Requests

    private func handle(_ request: HAPMessage, session: HAPServerSession) async {
        guard case .request(let method, let target) = request.kind else { return session.close() }
        let path = String(target.split(separator: "?", maxSplits: 1).first ?? "")
        let query = target.contains("?") ? String(target.split(separator: "?", maxSplits: 1)[1]) : ""
        if !session.isVerified {
            switch (method, path) {
            case ("POST", "/pair-setup"): return await pairSetup(request.body, session: session)
            case ("POST", "/pair-verify"): return await pairVerify(request.body, session: session)
            case ("POST", "/identify"):
                if await delegate.pairings().isEmpty {
                    await delegate.identify()
                    return session.send(HAPMessage.response(status: 204, reason: "No Content"))
                }
                return session.send(status(400, HAPStatus.insufficientPrivileges))
            default:
                return session.send(status(470, HAPStatus.insufficientPrivileges))
            }
        }
        switch (method, path) {
        case ("GET", "/accessories"):
            session.send(HAPMessage.response(status: 200, reason: "OK", contentType: "application/hap+json", body: await delegate.accessoriesJSON()))
        case ("GET", "/characteristics"):
            await read(query: query, session: session)
        case ("PUT", "/characteristics"):
            await write(request.body, session: session)
        case ("PUT", "/prepare"):
            guard case .success(let json) = JSONValue.parse(request.body), let ttl = json["ttl"]?.number, let pid = json["pid"]?.number, ttl > 0 else {
                return session.send(status(400, HAPStatus.invalidValue))
            }
            session.prepare(pid: UInt64(clamping: pid.hapInt ?? 0), ttl: .milliseconds(Int64(min(ttl, 60_000))))
            session.send(HAPMessage.response(status: 200, reason: "OK", contentType: "application/hap+json", body: Array(#"{"status":0}"#.utf8)))
        case ("POST", "/pairings"):
            await pairings(request.body, session: session)
        case ("POST", "/pair-verify"):
            session.send(status(400, HAPStatus.invalidValue))
        default:
            session.send(status(404, HAPStatus.noSuchResource))
        }
    }

    private func status(_ code: Int, _ hapStatus: Int) -> [UInt8] {
        let reason = [400: "Bad Request", 404: "Not Found", 422: "Unprocessable Entity", 470: "Connection Authorization Required", 500: "Internal Server Error"][code] ?? "Error"
        return HAPMessage.response(status: code, reason: reason, contentType: "application/hap+json", body: Array("{\"status\":\(hapStatus)}".utf8))
    }

    private func tlvResponse(_ body: [UInt8]) -> [UInt8] {
        HAPMessage.response(status: 200, reason: "OK", contentType: "application/pairing+tlv8", body: body)
    }

    private func pairSetup(_ body: [UInt8], session: HAPServerSession) async {
        let stateNumber = (try? TLV8.decode(body))?.integer(.state) ?? 1
        if stateNumber == 1 {
            if !(await delegate.pairings().isEmpty) {
                return session.send(tlvResponse(PairSetupServer.error(.unavailable, state: 2)))
            }
            if await delegate.failedPairSetups() >= 100 {
                return session.send(tlvResponse(PairSetupServer.error(.maxTries, state: 2)))
            }
            let busy = state.withLock { state -> Bool in
                if let owner = state.pairSetupOwner, owner != session.id, state.sessions[owner] != nil { return true }
                state.pairSetupOwner = session.id
                return false
            }
            if busy { return session.send(tlvResponse(PairSetupServer.error(.busy, state: 2))) }
        } else if state.withLock({ $0.pairSetupOwner }) != session.id {
            return session.send(tlvResponse(PairSetupServer.error(.unknown, state: UInt8(clamping: stateNumber + 1))))
        }
        switch session.pairSetup(body, setupCode: delegate.setupCode, identity: delegate.identity) {
        case .answer(let answer):
            session.send(tlvResponse(answer))
        case .wrongCode(let answer):
            let failures = await delegate.failedPairSetup()
            logger.warning("homekit bridge: pair setup with a wrong code (\(failures) failed attempt(s); pairing stops at 100)")
            releasePairSetup(session)
            session.send(tlvResponse(answer))
        case .paired(let answer, let pairing):
            releasePairSetup(session)
            guard await delegate.addPairing(pairing) else {
                return session.send(tlvResponse(PairSetupServer.error(.maxPeers, state: 6)))
            }
            logger.notice("homekit bridge: paired with controller \(pairing.pairingID) (admin)")
            session.send(tlvResponse(answer))
        }
    }

    private func releasePairSetup(_ session: HAPServerSession) {
        state.withLock { if $0.pairSetupOwner == session.id { $0.pairSetupOwner = nil } }
    }

    private func pairVerify(_ body: [UInt8], session: HAPServerSession) async {
        let known = await delegate.pairings()
        switch session.pairVerify(body, identity: delegate.identity, known: known) {
        case .answer(let answer):
            session.send(tlvResponse(answer))
        case .verified(let answer, let channel, let controller):
            // M4 goes out in plaintext; everything after it is encrypted.
            session.send(tlvResponse(answer))
            session.startEncryption(channel, controller: controller)
        }
    }

    private func read(query: String, session: HAPServerSession) async {
        var ids: [(aid: Int, iid: Int)] = []
        var withEvents = false, withMeta = false, withPerms = false, withType = false
        for part in query.split(separator: "&") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "id" {
                for item in pair[1].split(separator: ",") {
                    let numbers = item.split(separator: ".").compactMap { Int($0) }
                    if numbers.count == 2 { ids.append((numbers[0], numbers[1])) }
                }
            } else {
                let on = pair[1] == "1" || pair[1] == "true"
                switch pair[0] {
                case "ev": withEvents = on
                case "meta": withMeta = on
                case "perms": withPerms = on
                case "type": withType = on
                default: break
                }
            }
        }
        guard !ids.isEmpty, ids.count <= 1000 else { return session.send(status(400, HAPStatus.invalidValue)) }
        let values = await delegate.read(ids)
        let failed = values.contains { ($0.status ?? 0) != 0 }
        var items: [JSONValue] = []
        for value in values {
            var object: [String: JSONValue] = ["aid": .number(Double(value.aid)), "iid": .number(Double(value.iid))]
            if let item = value.value { object["value"] = item }
            if failed { object["status"] = .number(Double(value.status ?? 0)) }
            if withEvents { object["ev"] = .bool(session.isSubscribed(aid: value.aid, iid: value.iid)) }
            if withMeta || withPerms || withType, let description = await delegate.describe(aid: value.aid, iid: value.iid) {
                for (key, field) in description {
                    let wanted = key == "perms" ? withPerms : key == "type" ? withType : withMeta
                    if wanted { object[key] = field }
                }
            }
            items.append(.object(object))
        }
        let body = Array(JSONValue.object(["characteristics": .array(items)]).render().utf8)
        session.send(HAPMessage.response(status: failed ? 207 : 200, reason: failed ? "Multi-Status" : "OK", contentType: "application/hap+json", body: body))
    }

    private func write(_ body: [UInt8], session: HAPServerSession) async {
        guard case .success(let json) = JSONValue.parse(body), case .array(let items)? = json["characteristics"], !items.isEmpty, items.count <= 500 else {
            return session.send(status(400, HAPStatus.invalidValue))
        }
        var results: [Int: Int] = [:]  // item index → status
        var writes: [(index: Int, value: CharacteristicValue)] = []
        for (index, item) in items.enumerated() {
            guard let aid = item["aid"]?.number.flatMap(\.hapInt), let iid = item["iid"]?.number.flatMap(\.hapInt) else {
                results[index] = HAPStatus.invalidValue
                continue
            }
            if let subscribe = item["ev"]?.bool {
                switch await delegate.notifies(aid: aid, iid: iid) {
                case nil: results[index] = HAPStatus.noSuchResource
                case false?: results[index] = subscribe ? HAPStatus.notificationNotSupported : HAPStatus.success
                case true?:
                    session.subscribe(aid: aid, iid: iid, subscribe)
                    results[index] = HAPStatus.success
                }
            }
            if let value = item["value"] {
                // A timed write's pid must have been prepared and not expired.
                if let pid = item["pid"]?.number, !session.takePrepared(pid: UInt64(clamping: pid.hapInt ?? 0)) {
                    results[index] = HAPStatus.invalidValue
                    continue
                }
                writes.append((index, CharacteristicValue(aid: aid, iid: iid, value: value)))
            } else if item["ev"] == nil {
                results[index] = HAPStatus.invalidValue
            }
        }
        if !writes.isEmpty {
            let statuses = await delegate.write(writes.map(\.value), session: session.id)
            for (position, write) in writes.enumerated() {
                results[write.index] = position < statuses.count ? (statuses[position].status ?? 0) : HAPStatus.communicationFailure
            }
        }
        if results.values.allSatisfy({ $0 == 0 }) {
            return session.send(HAPMessage.response(status: 204, reason: "No Content"))
        }
        let answers: [JSONValue] = items.indices.map { index in
            .object(["aid": items[index]["aid"] ?? .null, "iid": items[index]["iid"] ?? .null, "status": .number(Double(results[index] ?? 0))])
        }
        let answer = Array(JSONValue.object(["characteristics": .array(answers)]).render().utf8)
        session.send(HAPMessage.response(status: 207, reason: "Multi-Status", contentType: "application/hap+json", body: answer))
    }

    private func pairings(_ body: [UInt8], session: HAPServerSession) async {
        guard let tlv = try? TLV8.decode(body), let method = tlv.integer(.method) else {
            return session.send(tlvResponse(PairSetupServer.error(.unknown, state: 2)))
        }
        guard session.controller?.isAdmin == true else {
            return session.send(tlvResponse(PairSetupServer.error(.authentication, state: 2)))
        }
        switch PairingMethod(rawValue: UInt8(clamping: method)) {
        case .addPairing?:
            guard let id = tlv[.identifier], let key = tlv[.publicKey], key.count == 32 else {
                return session.send(tlvResponse(PairSetupServer.error(.unknown, state: 2)))
            }
            let pairing = ControllerPairing(pairingID: String(decoding: id, as: UTF8.self), publicKey: key, isAdmin: tlv.integer(.permissions) == 1)
            if let existing = await delegate.pairings().first(where: { $0.pairingID == pairing.pairingID }), existing.publicKey != key {
                return session.send(tlvResponse(PairSetupServer.error(.unknown, state: 2)))
            }
            guard await delegate.addPairing(pairing) else { return session.send(tlvResponse(PairSetupServer.error(.maxPeers, state: 2))) }
            logger.notice("homekit bridge: controller \(pairing.pairingID) added (\(pairing.isAdmin ? "admin" : "user"))")
            session.send(tlvResponse(TLV8([(.state, [2])]).encoded()))
        case .removePairing?:
            guard let id = tlv[.identifier] else { return session.send(tlvResponse(PairSetupServer.error(.unknown, state: 2))) }
            let pairingID = String(decoding: id, as: UTF8.self)
            await delegate.removePairing(pairingID)
            logger.notice("homekit bridge: controller \(pairingID) removed")
            session.send(tlvResponse(TLV8([(.state, [2])]).encoded()))
            // Its sessions end; with no admin left every pairing went, and every session ends.
            let remaining = await delegate.pairings()
            closeSessions(of: remaining.isEmpty ? nil : pairingID)
        case .listPairings?:
            var items: [TLV8.Item] = [TLV8.Item(TLVType.state.rawValue, [2])]
            for (index, pairing) in await delegate.pairings().enumerated() {
                if index > 0 { items.append(TLV8.Item(TLVType.separator.rawValue, [])) }
                items += [TLV8.Item(TLVType.identifier.rawValue, Array(pairing.pairingID.utf8)), TLV8.Item(TLVType.publicKey.rawValue, pairing.publicKey),
                          TLV8.Item(TLVType.permissions.rawValue, [pairing.isAdmin ? 1 : 0])]
            }
            session.send(tlvResponse(TLV8(items).encoded()))
        default:
            session.send(tlvResponse(PairSetupServer.error(.unknown, state: 2)))
        }
    }
}

/// One controller's connection: its pairing steps, cipher, subscriptions and prepared timed writes. Everything
/// written is sealed and handed to the event loop under one lock, so responses and events keep their frame counter order.
final class HAPServerSession: Sendable {
    private struct State {
        /// Decrypts (from pair-verify M4 on) and splits what arrives.
        var inbound = HAPInbound(maxBodyBytes: 1 << 20)
        /// Encrypts what leaves: a copy of the same keys with its own counter, from the message after M4.
        var sendCipher: SecureChannel?
        var controller: ControllerPairing?
        var setup: PairSetupServer?
        var verify: PairVerifyServer?
        var subscriptions: Set<Int64> = []
        var prepared: [UInt64: ContinuousClock.Instant] = [:]
        var closed = false
    }

    let id: UInt64
    private let channel: any Channel
    private unowned let server: HAPAccessoryServer
    private let state = Mutex(State())

    init(id: UInt64, channel: any Channel, server: HAPAccessoryServer) {
        self.id = id
        self.channel = channel
        self.server = server
    }

    var isVerified: Bool { state.withLock { $0.inbound.isEncrypted } }
    var isClosed: Bool { state.withLock { $0.closed } }
    var controller: ControllerPairing? { state.withLock { $0.controller } }

    func receive(_ bytes: [UInt8]) throws(HAPError) -> [HAPMessage] {
        let result: Result<[HAPMessage], HAPError> = state.withLock { state in
            do throws(HAPError) { return .success(try state.inbound.receive(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    func pairSetup(_ body: [UInt8], setupCode: String, identity: AccessoryIdentity) -> PairSetupServer.Outcome {
        state.withLock { state in
            var setup = state.setup ?? PairSetupServer(setupCode: setupCode, identity: identity)
            let outcome = setup.handle(body)
            state.setup = setup
            return outcome
        }
    }

    func pairVerify(_ body: [UInt8], identity: AccessoryIdentity, known: [ControllerPairing]) -> PairVerifyServer.Outcome {
        state.withLock { state in
            var verify = state.verify ?? PairVerifyServer(identity: identity)
            let outcome = verify.handle(body) { id in known.first { $0.pairingID == id } }
            state.verify = verify
            return outcome
        }
    }

    /// After M4 (sent in plaintext, already written): from now on both ways are encrypted.
    func startEncryption(_ cipher: SecureChannel, controller: ControllerPairing) {
        state.withLock { state in
            state.inbound.cipher = cipher
            state.sendCipher = cipher
            state.controller = controller
        }
    }

    static func key(_ aid: Int, _ iid: Int) -> Int64 { Int64(aid) << 32 | Int64(iid & 0xFFFF_FFFF) }

    func subscribe(aid: Int, iid: Int, _ on: Bool) {
        state.withLock { state in
            if on { state.subscriptions.insert(Self.key(aid, iid)) } else { state.subscriptions.remove(Self.key(aid, iid)) }
        }
    }

    func isSubscribed(aid: Int, iid: Int) -> Bool { state.withLock { $0.subscriptions.contains(Self.key(aid, iid)) } }

    func subscribed(_ values: [CharacteristicValue]) -> [CharacteristicValue] {
        state.withLock { state in
            guard state.inbound.isEncrypted, !state.closed else { return [] }
            return values.filter { state.subscriptions.contains(Self.key($0.aid, $0.iid)) }
        }
    }

    func prepare(pid: UInt64, ttl: Duration) {
        state.withLock { $0.prepared[pid] = ContinuousClock.now + ttl }
    }

    /// True once for a pid prepared and not expired.
    func takePrepared(pid: UInt64) -> Bool {
        state.withLock { state in
            guard let until = state.prepared.removeValue(forKey: pid) else { return false }
            return ContinuousClock.now <= until
        }
    }

    /// Encrypts one message (once the session is verified) and hands it to the connection's event loop at once.
    /// Sealing and writing under one lock keeps frames in counter order; the write goes straight to NIO (no task to
    /// schedule), so an event leaves in the same pass that publishes the state on MQTT, whatever the thread pool does.
    func send(_ message: [UInt8]) {
        state.withLock { state in
            guard !state.closed else { return }
            var bytes = message
            if var cipher = state.sendCipher {
                guard let sealed = try? cipher.seal(message) else {
                    state.closed = true
                    return
                }
                state.sendCipher = cipher
                bytes = sealed
            }
            channel.writeAndFlush(ByteBuffer(bytes: bytes), promise: nil)
        }
    }

    func close() {
        state.withLock { $0.closed = true }
        channel.close(promise: nil)
    }
}
