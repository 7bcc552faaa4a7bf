import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM or SIGINT starts a graceful stop (the service group's); if that has not ended the process within
/// `limit` (a service stuck on something that ignores cancellation), the process exits anyway, with a line
/// that says so: a stop request is never ignored, and systemd never has to wait for its own kill.
enum StopDeadline {
    /// Kept for the process's life: a signal source that is released stops delivering.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    static func arm(limit: Duration) {
        let queue = DispatchQueue(label: "lbs-gateway.stop-deadline")
        let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
        for signalNumber in [SIGTERM, SIGINT] {
            // Dispatch delivers the signal only while its default action is off (ServiceLifecycle does the same).
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                queue.asyncAfter(deadline: .now() + seconds) {
                    writeToStandardError("lbs-gateway: still stopping \(seconds) s after the stop signal; exiting now\n")
                    exit(1)
                }
            }
            source.resume()
            sources.append(source)
        }
    }
}
