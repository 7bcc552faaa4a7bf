import CSQLite

/// A failure SQLite reported: its message and extended result code, never the statement's arguments (which may
/// hold command payloads).
struct SQLiteError: Error, CustomStringConvertible {
    var code: Int32
    var message: String

    var description: String { "\(message) (SQLite \(code))" }

    /// A column held another type than the row's reader expected (a row this release did not write).
    var isTypeMismatch: Bool { code == SQLITE_MISMATCH }
}

/// A value bound to a statement's parameter.
enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
}

/// What can be bound to a parameter.
protocol SQLiteBindable {
    var sqliteValue: SQLiteValue { get }
}

extension String: SQLiteBindable { var sqliteValue: SQLiteValue { .text(self) } }
extension Int: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(Int64(self)) } }
extension Int64: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(self) } }
extension Double: SQLiteBindable { var sqliteValue: SQLiteValue { .real(self) } }
extension Bool: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) } }
extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    var sqliteValue: SQLiteValue { self?.sqliteValue ?? .null }
}

/// A statement's arguments, in parameter order: `[id, json, nil]`.
struct StatementArguments: ExpressibleByArrayLiteral {
    var values: [SQLiteValue]

    init(arrayLiteral elements: (any SQLiteBindable)?...) {
        values = elements.map { $0?.sqliteValue ?? .null }
    }
}

/// One SQLite connection (`sqlite3 *`) and its prepared statements. Not thread-safe: `SQLitePool` hands each
/// connection to one thread at a time.
final class SQLiteConnection {
    let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]

    /// Opens `path` (read-only when `readOnly`), with SQLite's own mutexes off: the pool serializes each connection.
    init(path: String, readOnly: Bool, busyTimeoutSeconds: Double) throws(SQLiteError) {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw SQLiteError(code: status, message: message)
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, Int32(max(0, busyTimeoutSeconds * 1000)))
    }

    /// Finalizes every statement and closes the connection.
    func close() {
        for statement in statements.values { statement.finalize() }
        statements = [:]
        sqlite3_close_v2(handle)
    }

    var lastError: SQLiteError {
        SQLiteError(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Runs one or more statements separated by semicolons; with arguments, exactly one.
    func execute(sql: String, arguments: StatementArguments = []) throws(SQLiteError) {
        if arguments.values.isEmpty {
            var message: UnsafeMutablePointer<CChar>?
            guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
                let error = SQLiteError(code: sqlite3_extended_errcode(handle), message: message.map { String(cString: $0) } ?? lastError.message)
                sqlite3_free(message)
                throw error
            }
            return
        }
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// A prepared statement kept for the connection's life, so a statement run per command is parsed once.
    func cachedStatement(sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let statement = statements[sql] { return statement }
        let statement = try SQLiteStatement(connection: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changesCount: Int { Int(sqlite3_changes(handle)) }

    enum TransactionKind: String { case deferred = "DEFERRED", immediate = "IMMEDIATE" }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    func inTransaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        try execute(sql: "BEGIN \(kind.rawValue) TRANSACTION")
        let result: T
        do {
            result = try body()
        } catch {
            try? execute(sql: "ROLLBACK TRANSACTION")
            throw error
        }
        do {
            try execute(sql: "COMMIT TRANSACTION")
        } catch {
            // A failed COMMIT can leave the transaction open (SQLITE_BUSY) or already rolled back (I/O errors).
            if sqlite3_get_autocommit(handle) == 0 { try? execute(sql: "ROLLBACK TRANSACTION") }
            throw error
        }
        return result
    }

    /// Copies the WAL into the database and truncates it.
    func checkpointTruncating() throws(SQLiteError) {
        guard sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil) == SQLITE_OK else { throw lastError }
    }
}

/// A prepared statement of one connection.
final class SQLiteStatement {
    private let handle: OpaquePointer
    private unowned let connection: SQLiteConnection

    init(connection: SQLiteConnection, sql: String) throws(SQLiteError) {
        var handle: OpaquePointer?
        guard sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil) == SQLITE_OK,
              let handle else { throw connection.lastError }
        self.handle = handle
        self.connection = connection
    }

    func finalize() { sqlite3_finalize(handle) }

    /// Binds the arguments and runs the statement to its end, ignoring rows.
    func execute(arguments: StatementArguments = []) throws(SQLiteError) {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_DONE: return
            case SQLITE_ROW: continue
            default: throw connection.lastError
            }
        }
    }

    /// Binds the arguments; `next()` then steps through the rows. `reset()` ends the run.
    func bind(_ arguments: StatementArguments) throws(SQLiteError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        guard Int(sqlite3_bind_parameter_count(handle)) == arguments.values.count else {
            throw SQLiteError(code: SQLITE_RANGE, message: "the statement takes \(sqlite3_bind_parameter_count(handle)) arguments, not \(arguments.values.count)")
        }
        for (offset, value) in arguments.values.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32 = switch value {
            case .null: sqlite3_bind_null(handle, index)
            case .integer(let integer): sqlite3_bind_int64(handle, index, integer)
            case .real(let real): sqlite3_bind_double(handle, index, real)
            case .text(let text): sqlite3_bind_text(handle, index, text, -1, Self.transient)
            }
            guard status == SQLITE_OK else { throw connection.lastError }
        }
    }

    /// The next row's values, or nil at the end (the statement is then reset).
    func next() throws(SQLiteError) -> SQLiteRow? {
        switch sqlite3_step(handle) {
        case SQLITE_ROW:
            let count = sqlite3_column_count(handle)
            var values: [SQLiteValue] = []
            values.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(handle, column) {
                case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(handle, column)))
                case SQLITE_FLOAT: values.append(.real(sqlite3_column_double(handle, column)))
                case SQLITE_NULL: values.append(.null)
                default:
                    // Text (and blobs, which the schema has none of) as UTF-8 text.
                    let count = Int(sqlite3_column_bytes(handle, column))
                    if let bytes = sqlite3_column_text(handle, column) {
                        values.append(.text(String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)))
                    } else {
                        values.append(.text(""))
                    }
                }
            }
            return SQLiteRow(values: values)
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return nil
        default:
            let error = connection.lastError
            sqlite3_reset(handle)
            throw error
        }
    }

    func reset() { sqlite3_reset(handle) }

    /// SQLite copies the bound text (the Swift string's buffer does not outlive the call).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// A row's values, copied out of the statement.
struct SQLiteRow {
    var values: [SQLiteValue]

    func decode<T: SQLiteDecodable>(_ type: T.Type, atIndex index: Int) throws(SQLiteError) -> T {
        guard values.indices.contains(index) else {
            throw SQLiteError(code: SQLITE_RANGE, message: "no column \(index) in a row of \(values.count)")
        }
        guard let value = T(sqliteValue: values[index]) else {
            throw SQLiteError(code: SQLITE_MISMATCH, message: "column \(index) holds \(values[index].kind), not \(T.self)")
        }
        return value
    }

    static func fetchAll(_ db: SQLiteConnection, sql: String, arguments: StatementArguments = []) throws(SQLiteError) -> [SQLiteRow] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }

    static func fetchAll(_ statement: SQLiteStatement, arguments: StatementArguments = []) throws(SQLiteError) -> [SQLiteRow] {
        try statement.bind(arguments)
        var rows: [SQLiteRow] = []
        while let row = try statement.next() { rows.append(row) }
        return rows
    }

    static func fetchOne(_ db: SQLiteConnection, sql: String, arguments: StatementArguments = []) throws(SQLiteError) -> SQLiteRow? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    static func fetchOne(_ statement: SQLiteStatement, arguments: StatementArguments = []) throws(SQLiteError) -> SQLiteRow? {
        try statement.bind(arguments)
        defer { statement.reset() }
        return try statement.next()
    }

    /// Rows one at a time (a day of raw readings need not be in memory at once).
    static func fetchCursor(_ statement: SQLiteStatement, arguments: StatementArguments = []) throws(SQLiteError) -> SQLiteStatement {
        try statement.bind(arguments)
        return statement
    }
}

extension SQLiteValue {
    var kind: String {
        switch self {
        case .null: "NULL"
        case .integer: "an integer"
        case .real: "a real"
        case .text: "text"
        }
    }
}

/// What a column can be read as.
protocol SQLiteDecodable {
    init?(sqliteValue: SQLiteValue)
}

extension String: SQLiteDecodable {
    init?(sqliteValue: SQLiteValue) {
        guard case .text(let text) = sqliteValue else { return nil }
        self = text
    }
}

extension Int64: SQLiteDecodable {
    init?(sqliteValue: SQLiteValue) {
        switch sqliteValue {
        case .integer(let integer): self = integer
        case .real(let real) where real == real.rounded() && abs(real) < 9.2e18: self = Int64(real)
        default: return nil
        }
    }
}

extension Int: SQLiteDecodable {
    init?(sqliteValue: SQLiteValue) {
        guard let integer = Int64(sqliteValue: sqliteValue) else { return nil }
        self = Int(integer)
    }
}

extension Double: SQLiteDecodable {
    init?(sqliteValue: SQLiteValue) {
        switch sqliteValue {
        case .real(let real): self = real
        case .integer(let integer): self = Double(integer)
        default: return nil
        }
    }
}

extension Optional: SQLiteDecodable where Wrapped: SQLiteDecodable {
    init?(sqliteValue: SQLiteValue) {
        if case .null = sqliteValue { self = .none; return }
        guard let wrapped = Wrapped(sqliteValue: sqliteValue) else { return nil }
        self = .some(wrapped)
    }
}

extension SQLiteDecodable {
    /// The first column of the first row, or nil without a row.
    /// The first column of the first row; nil without a row or when it is NULL.
    static func fetchOne(_ db: SQLiteConnection, sql: String, arguments: StatementArguments = []) throws(SQLiteError) -> Self? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    static func fetchOne(_ statement: SQLiteStatement, arguments: StatementArguments = []) throws(SQLiteError) -> Self? {
        guard let row = try SQLiteRow.fetchOne(statement, arguments: arguments), row.values.first != .null else { return nil }
        return try row.decode(Self.self, atIndex: 0)
    }

    /// The first column of every row.
    static func fetchAll(_ db: SQLiteConnection, sql: String, arguments: StatementArguments = []) throws(SQLiteError) -> [Self] {
        try SQLiteRow.fetchAll(db, sql: sql, arguments: arguments).map { row throws(SQLiteError) in try row.decode(Self.self, atIndex: 0) }
    }
}
