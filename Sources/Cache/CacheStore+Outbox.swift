import Synchronization

extension CacheStore {
    private static let outboxColumns = """
        id, seq, vendor_id, device_id, json, created_at, expires_at, state, attempts, last_error, result_json, updated_at
        """

    /// Durably stores a command before it is acknowledged; returns false when the id was already queued.
    @discardableResult
    public func enqueue(_ entry: OutboxEntry) throws(CacheError) -> Bool {
        try enqueue([entry]) == 1
    }

    /// Stores several commands in one transaction (one fsync), in order; returns how many were new.
    @discardableResult
    public func enqueue(_ entries: [OutboxEntry]) throws(CacheError) -> Int {
        guard entries.allSatisfy({ !$0.id.isEmpty && !$0.vendorID.isEmpty && !$0.deviceID.isEmpty }) else {
            throw CacheError(.invalidInput, "an outbox entry needs an id, a vendor id and a device id")
        }
        return try write("enqueue \(entries.count) commands") { db in
            let statement = try db.cachedStatement(sql: """
                INSERT INTO outbox (id, vendor_id, device_id, json, created_at, expires_at, state, attempts, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)
                ON CONFLICT (id) DO NOTHING
                """)
            var inserted = 0
            for entry in entries {
                try statement.execute(arguments: [
                    entry.id, entry.vendorID, entry.deviceID, entry.json, entry.createdAt, entry.expiresAt, entry.createdAt,
                ])
                inserted += db.changesCount
            }
            return inserted
        }
    }

    /// Applies several outbox changes in one transaction (one fsync), in order: new commands (stored as
    /// `sending` when they go to the vendor right away, so one commit is all that stands before the vendor
    /// call) and state changes of earlier ones (which then share that commit). A change that does not apply
    /// to its row (unknown id, a transition the row cannot take) is skipped and reported in the result;
    /// a database failure rolls back all of them and throws.
    ///
    /// `journalCheckpoint`: the changes include every journaled record up to this sequence number (see
    /// `OutboxJournal`); stored in the same transaction, so a replay never applies them again.
    @discardableResult
    public func apply(_ changes: [OutboxChange], journalCheckpoint: UInt64? = nil) throws(CacheError) -> [String] {
        for case .insert(let entry, _) in changes where entry.id.isEmpty || entry.vendorID.isEmpty || entry.deviceID.isEmpty {
            throw CacheError(.invalidInput, "an outbox entry needs an id, a vendor id and a device id (\(entry.id))")
        }
        return try write("update the outbox (\(changes.count) change(s))") { db in
            try applyChanges(changes, journalCheckpoint: journalCheckpoint, in: db)
        }
    }

    /// `apply`'s work inside a transaction the caller holds.
    private func applyChanges(_ changes: [OutboxChange], journalCheckpoint: UInt64?, in db: SQLiteConnection) throws -> [String] {
        let now = options.clock()
        var skipped: [String] = []
        let insert = try db.cachedStatement(sql: """
            INSERT INTO outbox (id, vendor_id, device_id, json, created_at, expires_at, state, attempts, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO NOTHING
            """)
        for change in changes {
            switch change {
            case .insert(let entry, let sending):
                try insert.execute(arguments: [
                    entry.id, entry.vendorID, entry.deviceID, entry.json, entry.createdAt, entry.expiresAt,
                    sending ? OutboxState.sending.rawValue : OutboxState.pending.rawValue, sending ? 1 : 0, entry.createdAt,
                ])
            case .transition(let id, let target, let error, let result):
                // Cached statements: every command's commit carries marks, and preparing them anew each time
                // was a fifth of the commit's CPU.
                let select = try db.cachedStatement(sql: "SELECT state FROM outbox WHERE id = ?")
                guard let current = try String.fetchOne(select, arguments: [id]),
                      let state = OutboxState(rawValue: current), Self.allowedSources(of: target).contains(state) else {
                    skipped.append(id)
                    continue
                }
                try db.cachedStatement(sql: Self.transitionSQL).execute(
                    arguments: [target.rawValue, target == .sending ? 1 : 0, now, error, result, id])
            }
        }
        if let journalCheckpoint {
            try db.cachedStatement(sql: "UPDATE outbox_journal SET checkpoint = max(checkpoint, ?) WHERE id = 1")
                .execute(arguments: [Int64(bitPattern: journalCheckpoint)])
        }
        return skipped
    }

    private static let transitionSQL = """
        UPDATE outbox SET state = ?, attempts = attempts + ?, updated_at = ?,
            last_error = coalesce(?, last_error), result_json = coalesce(?, result_json)
        WHERE id = ?
        """

    /// The states a row may be in to move to `target` (the same rules as the single-step marks below).
    static func allowedSources(of target: OutboxState) -> Set<OutboxState> {
        switch target {
        case .sending: [.pending, .sending]
        case .acked: [.sending]
        case .failed, .expired: [.pending, .sending]
        case .pending: [.sending]
        }
    }

    /// Pending commands, oldest first (so each device sees its commands in order); all vendors when `vendorID` is nil.
    public func pending(vendorID: String? = nil) throws(CacheError) -> [OutboxEntry] {
        if let vendorID {
            return try fetchEntries(
                "SELECT \(Self.outboxColumns) FROM outbox WHERE state = 'pending' AND vendor_id = ? ORDER BY seq", [vendorID])
        }
        return try fetchEntries("SELECT \(Self.outboxColumns) FROM outbox WHERE state = 'pending' ORDER BY seq", [])
    }

    /// Commands left in `sending` by a crash or kill: the vendor may or may not have executed them.
    public func interruptedEntries() throws(CacheError) -> [OutboxEntry] {
        try fetchEntries("SELECT \(Self.outboxColumns) FROM outbox WHERE state = 'sending' ORDER BY seq", [])
    }

    /// One entry by id, in any state.
    public func outboxEntry(id: String) throws(CacheError) -> OutboxEntry? {
        try fetchEntries("SELECT \(Self.outboxColumns) FROM outbox WHERE id = ?", [id]).first
    }

    /// How many entries are in each state (every state is present, possibly 0).
    public func outboxCounts() throws(CacheError) -> [OutboxState: Int] {
        try read("count outbox") { db in
            var counts = Dictionary(uniqueKeysWithValues: OutboxState.allCases.map { ($0, 0) })
            for row in try SQLiteRow.fetchAll(db, sql: "SELECT state, count(*) FROM outbox GROUP BY state") {
                if let state = OutboxState(rawValue: try row.decode(String.self, atIndex: 0)) {
                    counts[state] = try row.decode(Int.self, atIndex: 1)
                }
            }
            return counts
        }
    }

    /// Marks a command as handed to the vendor and counts the attempt; durable before the vendor call.
    public func markSending(id: String) throws(CacheError) {
        try transition(id: id, to: .sending, countsAttempt: true)
    }

    /// Records the vendor's confirmation.
    public func markAcked(id: String, resultJSON: String?) throws(CacheError) {
        try transition(id: id, to: .acked, resultJSON: resultJSON)
    }

    /// Records a final failure.
    public func markFailed(id: String, error: String) throws(CacheError) {
        try transition(id: id, to: .failed, error: error)
    }

    /// Puts a command whose attempt failed transiently back in line, keeping its place.
    public func requeue(id: String, error: String) throws(CacheError) {
        try transition(id: id, to: .pending, error: error)
    }

    /// Records that a command passed its deadline unsent.
    public func markExpired(id: String) throws(CacheError) {
        try transition(id: id, to: .expired)
    }

    /// Marks every pending command whose deadline is before `now` as expired; returns how many.
    @discardableResult
    public func expireOverdue(now: Double) throws(CacheError) -> Int {
        try write("expire overdue commands") { db in
            try db.execute(
                sql: """
                    UPDATE outbox SET state = 'expired', updated_at = ?
                    WHERE state = 'pending' AND expires_at IS NOT NULL AND expires_at < ?
                    """,
                arguments: [now, now])
            return db.changesCount
        }
    }

    // MARK: - Internals

    private func transition(
        id: String, to target: OutboxState, countsAttempt: Bool = false, error: String? = nil, resultJSON: String? = nil
    ) throws(CacheError) {
        let allowed = Self.allowedSources(of: target)
        let now = options.clock()
        try write("mark command \(id) \(target.rawValue)") { db in
            guard let current = try String.fetchOne(db, sql: "SELECT state FROM outbox WHERE id = ?", arguments: [id]) else {
                throw CacheError(.notFound, "no outbox entry with id \(id)")
            }
            guard let state = OutboxState(rawValue: current), allowed.contains(state) else {
                throw CacheError(.invalidTransition, "outbox entry \(id) cannot go from \(current) to \(target.rawValue)")
            }
            try db.cachedStatement(sql: Self.transitionSQL).execute(
                arguments: [target.rawValue, countsAttempt ? 1 : 0, now, error, resultJSON, id])
        }
    }

    private func fetchEntries(_ sql: String, _ arguments: StatementArguments) throws(CacheError) -> [OutboxEntry] {
        try read("read outbox") { db in
            try SQLiteRow.fetchAll(db, sql: sql, arguments: arguments).map { row in
                let stateText = try row.decode(String.self, atIndex: 7)
                guard let state = OutboxState(rawValue: stateText) else {
                    throw CacheError(.corruptRow, "outbox row has unknown state \(stateText)")
                }
                return OutboxEntry(
                    id: try row.decode(String.self, atIndex: 0),
                    seq: try row.decode(Int64.self, atIndex: 1),
                    vendorID: try row.decode(String.self, atIndex: 2),
                    deviceID: try row.decode(String.self, atIndex: 3),
                    json: try row.decode(String.self, atIndex: 4),
                    createdAt: try row.decode(Double.self, atIndex: 5),
                    expiresAt: try row.decode(Double?.self, atIndex: 6),
                    state: state,
                    attempts: try row.decode(Int.self, atIndex: 8),
                    lastError: try row.decode(String?.self, atIndex: 9),
                    resultJSON: try row.decode(String?.self, atIndex: 10),
                    updatedAt: try row.decode(Double.self, atIndex: 11))
            }
        }
    }

    // MARK: - The outbox journal

    /// Opens the outbox journal beside the database for appending (see `OutboxJournal`), after applying what it
    /// holds beyond the checkpoint. Fails when another process holds it. `close()` shuts it down.
    public func openOutboxJournal(capacity: Int = OutboxJournal.defaultCapacity) throws(CacheError) -> OutboxJournal {
        try ensureOpen("open the outbox journal")
        if let open = journal.withLock({ $0 }) { return open }
        let opened = try OutboxJournal(path: OutboxJournal.path(forDatabase: path), database: try outboxJournalDatabaseID(),
                                       capacity: capacity) { records in
            try applyJournalRecords(records)
        }
        journal.withLock { $0 = opened }
        return opened
    }

    /// The highest journaled sequence number the outbox holds.
    public func outboxJournalCheckpoint() throws(CacheError) -> UInt64 {
        try read("read the outbox journal checkpoint") { db in
            UInt64(bitPattern: try Int64.fetchOne(db, sql: "SELECT checkpoint FROM outbox_journal WHERE id = 1") ?? 0)
        }
    }

    /// This database's id in the journal's records.
    func outboxJournalDatabaseID() throws(CacheError) -> UInt64 {
        try read("read the outbox journal's database id") { db in
            UInt64(bitPattern: try Int64.fetchOne(db, sql: "SELECT database_id FROM outbox_journal WHERE id = 1") ?? 0)
        }
    }

    /// Replays a journal no process holds (a gateway that crashed); one a live gateway holds is its to write.
    /// Opening the store does this unless `Options.replaysOutboxJournal` is false.
    public func replayIdleOutboxJournal() throws(CacheError) {
        guard let (bytes, inUse) = try OutboxJournal.read(path: OutboxJournal.path(forDatabase: path)), !inUse else { return }
        _ = try applyJournalRecords(OutboxJournal.records(in: bytes, database: try outboxJournalDatabaseID()))
    }

    /// Applies, in one transaction, the changes of the records above the checkpoint (read inside it, so two
    /// openers racing apply each record once) and moves the checkpoint past them; returns the checkpoint.
    func applyJournalRecords(_ records: [(sequence: UInt64, payload: ArraySlice<UInt8>)]) throws(CacheError) -> UInt64 {
        let checkpoint = try outboxJournalCheckpoint()
        let newer = records.filter { $0.sequence > checkpoint }.sorted { $0.sequence < $1.sequence }
        guard let last = newer.last?.sequence else { return checkpoint }
        var changes: [OutboxChange] = []
        for record in newer {
            guard let decoded = OutboxJournal.decode(record.payload) else {
                throw CacheError(.openFailed, "the outbox journal beside \(path) holds a record this release cannot read (sequence \(record.sequence)); was it written by a newer release?")
            }
            changes += decoded
        }
        return try write("replay the outbox journal") { db in
            let current = UInt64(bitPattern: try Int64.fetchOne(db, sql: "SELECT checkpoint FROM outbox_journal WHERE id = 1") ?? 0)
            guard current == checkpoint else { return current }
            _ = try applyChanges(changes, journalCheckpoint: last, in: db)
            return last
        }
    }
}
