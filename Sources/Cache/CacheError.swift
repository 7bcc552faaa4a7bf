/// A failure of the gateway store, with a stable code and a readable message.
public struct CacheError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure happened.
    public enum Code: String, Sendable, Equatable {
        /// The database file could not be opened or configured.
        case openFailed
        /// A schema migration failed.
        case migrationFailed
        /// SQLite reported an error while reading or writing.
        case databaseError
        /// A stored row holds a value of an unexpected type.
        case corruptRow
        /// No row with the given identifier exists.
        case notFound
        /// An outbox entry cannot move from its current state to the requested one.
        case invalidTransition
        /// An argument was rejected before touching the database.
        case invalidInput
        /// The store was closed.
        case closed
    }

    /// The stable failure code.
    public let code: Code
    /// A readable explanation; never contains stored payloads.
    public let message: String

    /// Creates an error with a code and a readable message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `cache.<code>: <message>`, for logs.
    public var description: String { "cache.\(code.rawValue): \(message)" }

    /// Turns any error thrown inside a database access into a `CacheError`.
    ///
    /// Only SQLite's own message and result code are kept: statement arguments (which may hold
    /// command payloads) never reach the message.
    static func wrap(_ error: any Error, _ context: String, as code: Code = .databaseError) -> CacheError {
        switch error {
        case let cacheError as CacheError:
            return cacheError
        case let sqliteError as SQLiteError:
            return CacheError(sqliteError.isTypeMismatch ? .corruptRow : code, "\(context): \(sqliteError.message) (SQLite \(sqliteError.code))")
        default:
            return CacheError(code, "\(context): \(String(describing: error))")
        }
    }
}
