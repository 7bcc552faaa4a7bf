import Foundation
import GatewayModel

/// Home Assistant's HomeKit controller (aiohomekit, `deploy/homekit/hap-controller.py`) driven step by step: one JSON
/// command a line on its stdin, one JSON answer a line on its stdout. An independent controller for the bridge tests.
public final class HAPController: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let lock = NSLock()
    private var buffer = Data()

    /// `python`: the HAP venv's (`deploy/homekit/peer-setup.sh`); `script`: `deploy/homekit/hap-controller.py`.
    public init(python: String, script: String = (Fixtures.packageRoot() ?? ".") + "/deploy/homekit/hap-controller.py", logDirectory: String) throws {
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script]
        process.standardInput = input
        process.standardOutput = output
        let log = logDirectory + "/hap-controller-\(UInt32.random(in: 0...UInt32.max)).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
    }

    /// Sends one command and returns its answer (`ok` false answers are returned, not thrown).
    public func send(_ command: [String: Any], timeout: Duration = .seconds(30)) async throws -> [String: Any] {
        let line = try JSONSerialization.data(withJSONObject: command) + Data("\n".utf8)
        input.fileHandleForWriting.write(line)
        let handle = output.fileHandleForReading
        let name = String(describing: command["cmd"] ?? "?")
        let text: String = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { [self] in
                let deadline = Date().addingTimeInterval(timeout.inSeconds)
                while true {
                    if let newline = lock.withLock({ buffer.firstIndex(of: 10) }) {
                        let line = lock.withLock { () -> Data in
                            let line = buffer[buffer.startIndex..<newline]
                            buffer.removeSubrange(buffer.startIndex...newline)
                            return Data(line)
                        }
                        return continuation.resume(returning: String(decoding: line, as: UTF8.self))
                    }
                    guard Date() < deadline, process.isRunning else {
                        return continuation.resume(throwing: TestSupportError("hap-controller did not answer \(name)"))
                    }
                    let chunk = handle.availableData
                    if chunk.isEmpty { usleep(10_000) } else { lock.withLock { buffer.append(chunk) } }
                }
            }
        }
        guard let answer = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
            throw TestSupportError("hap-controller answered: \(text)")
        }
        return answer
    }

    public func stop() {
        try? input.fileHandleForWriting.write(contentsOf: Data("{\"cmd\":\"close\"}\n".utf8))
        try? input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
    }
}
