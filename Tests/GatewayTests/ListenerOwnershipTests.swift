import Glibc
@testable import GatewayTesting
import TestTraits
import Testing

/// The test helpers call a server started only when the listener on its port is its own: parallel tests can draw
/// the same free port, and the server that lost the bind must not pass for started on the other's listener.
@Suite(.timeLimit(.minutes(1))) struct ListenerOwnershipTests {
    @Test func anotherProcesssListenerOnThePortDoesNotCountAsTheStartedServers() async throws {
        let other = try openLoopbackListener(backlog: 1024, what: "another test's server")
        defer { close(other.fd) }  // never accepts: its backlog holds the probes' connections
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Stands for a server that lost the race for the port and has not exited yet.
        let loser = try ProcessRunner(executable: "sleep", arguments: ["30"], outputDirectory: directory.path, name: "sleep")
        #expect(loopbackPortAcceptsConnections(other.port))
        #expect(try await waitForListener(loser, port: other.port, timeout: .milliseconds(300)) == false)
        _ = await loser.stop(grace: .seconds(1))
        #expect(processTreeOwnsListener(root: getpid(), port: other.port))
    }

    @Test func aServerListeningInAChildOfTheStartedProcessCounts() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let port = try freeLoopbackPort()
        // `; exit`: the shell forks socat instead of becoming it, as a wrapper such as setsid may.
        let wrapper = try ProcessRunner(executable: "/bin/sh",
                                        arguments: ["-c", "socat TCP-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork OPEN:/dev/null; exit"],
                                        outputDirectory: directory.path, name: "sh")
        #expect(try await waitForListener(wrapper, port: port, timeout: .seconds(10)))
        #expect(!processTreeOwnsListener(root: getpid(), port: port))
        for child in childProcesses(of: wrapper.pid) { kill(child, SIGKILL) }
        wrapper.kill()
        _ = await wrapper.waitForExit(timeout: .seconds(10))
    }
}
