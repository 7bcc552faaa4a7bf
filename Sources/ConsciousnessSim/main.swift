import ConsciousnessSimulator
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// consciousness-sim --port P --username U --password-file F [--expires-in S] [--host H]
/// The password comes from a file or CONSCIOUSNESS_SIM_PASSWORD, never from a flag (flags show up in `ps`).
struct Options {
    var host = "127.0.0.1"
    var port: UInt16 = 8000
    var username = "admin"
    var passwordFile: String?
    var expiresIn = 3600
}

let usage = """
    usage: consciousness-sim [--host 127.0.0.1] [--port 8000] [--username admin] [--password-file FILE] [--expires-in 3600]
      The password is read from --password-file or the CONSCIOUSNESS_SIM_PASSWORD environment variable.
      Admin routes: POST/DELETE /_sim/faults, POST /_sim/expire-tokens, GET /_sim/counters.
      Faults ({"fault": name, "count": n | "until_cleared": true, "path", "method"}): server_errors, rate_limit (retry_after),
      slow (delay_ms), late (delay_ms: apply and answer after the delay, in arrival order), unapplied (delay_ms: answer
      success after the delay but never carry out the control request), malformed_json, html_error, expired_token, echo_credentials_401, echo_input_422, echo_password_html_500, down (seconds).
    """

func fail(_ message: String) -> Never {
    FileHandleWriter.standardError("consciousness-sim: \(message)\n")
    exit(2)
}

enum FileHandleWriter {
    static func standardError(_ text: String) {
        write(to: 2, text)
    }

    static func standardOutput(_ text: String) {
        write(to: 1, text)
    }

    /// Unbuffered write(2), so lines appear at once even when stdout is a pipe.
    private static func write(to descriptor: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}

func parseOptions(_ arguments: [String]) -> Options {
    var options = Options()
    var remaining = arguments[...]
    while let flag = remaining.popFirst() {
        if flag == "--help" || flag == "-h" {
            FileHandleWriter.standardOutput(usage + "\n")
            exit(0)
        }
        guard let value = remaining.popFirst() else { fail("\(flag) needs a value\n\(usage)") }
        switch flag {
        case "--host": options.host = value
        case "--port":
            guard let port = UInt16(value) else { fail("--port must be 0-65535") }
            options.port = port
        case "--username": options.username = value
        case "--password-file": options.passwordFile = value
        case "--expires-in":
            guard let seconds = Int(value), seconds > 0 else { fail("--expires-in must be a positive number of seconds") }
            options.expiresIn = seconds
        case "--password": fail("pass the password with --password-file or CONSCIOUSNESS_SIM_PASSWORD, not on the command line")
        default: fail("unknown option \(flag)\n\(usage)")
        }
    }
    return options
}

func readPassword(_ options: Options) -> String {
    if let path = options.passwordFile {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: path)) else { fail("cannot read the password file") }
        let text = String(decoding: data, as: UTF8.self)
        // Files usually end with a newline that is not part of the password.
        let password = String(text.reversed().drop { $0 == "\n" || $0 == "\r" }.reversed())
        guard !password.isEmpty else { fail("the password file is empty") }
        return password
    }
    if let value = getenv("CONSCIOUSNESS_SIM_PASSWORD"), !String(cString: value).isEmpty {
        return String(cString: value)
    }
    fail("no password: use --password-file FILE or set CONSCIOUSNESS_SIM_PASSWORD")
}

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))
let simulator = ConsciousnessSimulator(configuration: .init(
    host: options.host,
    port: options.port,
    username: options.username,
    password: readPassword(options),
    expiresIn: options.expiresIn
))
do {
    let port = try await simulator.start()
    FileHandleWriter.standardOutput("consciousness-sim listening on http://\(options.host):\(port)\n")
} catch {
    fail("\(error)")
}
while true {
    try? await Task.sleep(for: .seconds(3600))
}
