import Foundation
import Testing
import VendorKit

/// The helper programs the gateway starts (Avahi's browser and publisher) through `ChildProcess`.
@Suite struct ChildProcessTests {
    @Test func outputErrorsAndExitStatusComeBack() async throws {
        let child = try ChildProcess.spawn(["sh", "-c", "echo out; echo err >&2; exit 3"], captureOutput: true)
        let errorPipe = try #require(child.errors), outputPipe = try #require(child.output)
        async let errors = ChildProcess.readToEnd(errorPipe)
        let output = await ChildProcess.readToEnd(outputPipe)
        #expect(String(decoding: output, as: UTF8.self) == "out\n")
        #expect(String(decoding: await errors, as: UTF8.self) == "err\n")
        #expect(await child.waitForExit() == .exited(3))
        #expect(!child.isRunning)
    }

    @Test func aMissingProgramIsSaidSo() {
        #expect {
            _ = try ChildProcess.spawn(["lbs-no-such-program-\(UInt32.random(in: 0...UInt32.max))"], captureOutput: true)
        } throws: { error in
            (error as? ChildProcess.SpawnError)?.notFound == true
        }
    }

    /// The child sees only its three standard descriptors (not the gateway's sockets, even those opened without
    /// O_CLOEXEC), no blocked signals (the gateway blocks SIGTERM for its own handling), and ends on SIGKILL.
    @Test func theChildInheritsNoDescriptorsAndNoSignalMask() async throws {
        let leaked = open("/dev/null", O_RDONLY)  // no O_CLOEXEC, as libmosquitto's and libcurl's sockets may be
        defer { close(leaked) }
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let child = try ChildProcess.spawn(["sh", "-c", "ls /proc/self/fd; grep SigBlk /proc/self/status"], captureOutput: true)
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        let errorPipe = try #require(child.errors), outputPipe = try #require(child.output)
        async let errors = ChildProcess.readToEnd(errorPipe)
        let lines = String(decoding: await ChildProcess.readToEnd(outputPipe), as: UTF8.self).split(separator: "\n")
        _ = await errors
        #expect(await child.waitForExit() == .exited(0))
        // 0, 1, 2 and the descriptor `ls` opens to read the folder.
        let descriptors = lines.compactMap { Int($0) }
        #expect(!descriptors.contains(Int(leaked)), "\(lines)")
        #expect(descriptors.count <= 4, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("SigBlk:") && $0.hasSuffix("0000000000000000") }, "\(lines)")

        let sleeper = try ChildProcess.spawn(["sleep", "30"], captureOutput: false)
        #expect(sleeper.isRunning)
        sleeper.kill()
        #expect(await sleeper.waitForExit() == .signalled(SIGKILL))
        sleeper.kill()  // a second kill after it was reaped signals nobody
    }
}

/// Form bodies and query values (Flume's, Powerwall's and Emporia's sign-in, Awair's paths): RFC 3986's unreserved
/// characters stay, every other byte of the UTF-8 is percent-encoded, as a server's form decoder expects.
@Suite struct FormEncodingTests {
    @Test func everythingButTheUnreservedCharactersIsEscaped() {
        #expect(FormEncoding.escape("abcXYZ019-._~") == "abcXYZ019-._~")
        #expect(FormEncoding.escape("a+b&c=d e/f?g#h%") == "a%2Bb%26c%3Dd%20e%2Ff%3Fg%23h%25")
        #expect(FormEncoding.escape("pässwörd €") == "p%C3%A4ssw%C3%B6rd%20%E2%82%AC")
        #expect(FormEncoding.escape("") == "")
        #expect(String(decoding: FormEncoding.body([("user", "me@x.io"), ("pass", "a&b")]), as: UTF8.self) == "user=me%40x.io&pass=a%26b")
        // What Foundation's percent-decoding reads back is the original.
        for text in ["pässwörd €", "a+b&c=d e", "😀 \u{0}\n"] {
            #expect(FormEncoding.escape(text).removingPercentEncoding == text)
        }
    }
}
