import GatewayModel
import GatewayTesting
import Resilience
import Testing

/// A command whose request may have reached the vendor is never repeated by `resilientCall`.
@Suite struct OutcomeUnknownTests {
    let clock = ManualClock()
    /// Immediate retries: only the outcome rule can stop them.
    let retry = RetryPolicy(maxAttempts: 3, baseDelay: .zero, maxDelay: .zero)
    let classifier = ErrorClassifier(vendor: "v")

    func call(_ use: QuotaScheduler.Use, failing failure: GatewayError) async -> (Result<Int, GatewayError>, calls: Int) {
        let breaker = CircuitBreaker(vendor: "v", settings: .init(minimumCalls: 100), clock: clock)
        var calls = 0
        do throws(GatewayError) {
            let value = try await resilientCall(breaker: breaker, retry: retry, use: use, clock: clock) { () async throws(GatewayError) -> Int in
                calls += 1
                if calls == 1 { throw failure }
                return 42
            }
            return (.success(value), calls)
        } catch {
            return (.failure(error), calls)
        }
    }

    @Test func timedOutCommandAfterSendingIsThrownOnceWithUnknownOutcome() async throws {
        let timeout = classifier.classify(.timeout, timeout: .seconds(10), requestSent: true)
        #expect(timeout.outcomeUnknown)
        let (result, calls) = await call(.command, failing: timeout)
        #expect(calls == 1)
        guard case .failure(let error) = result else {
            Issue.record("the command was repeated and succeeded")
            return
        }
        #expect(error.code == .vendorTimeout)
        #expect(error.outcomeUnknown)
        #expect(!error.retryable)
        #expect(error.message.contains("outcome is unknown"))
        #expect(error.message.contains("10 s"))
    }

    @Test func connectFailureOfACommandIsStillRetried() async throws {
        let refused = classifier.classify(.connectFailed, requestSent: false)
        #expect(!refused.outcomeUnknown)
        let (result, calls) = await call(.command, failing: refused)
        #expect(calls == 2)
        #expect((try? result.get()) == 42)
    }

    @Test func readsAreRetriedAfterATimeoutAndNothingIsUnknown() async throws {
        let (result, calls) = await call(.poll, failing: classifier.classify(.timeout, requestSent: true))
        #expect(calls == 2)
        #expect((try? result.get()) == 42)
    }

    @Test func whichFailuresMayHaveBeenCarriedOut() {
        #expect(classifier.classify(.timeout, requestSent: true).outcomeUnknown)
        #expect(!classifier.classify(.timeout, requestSent: false).outcomeUnknown)  // connect timeout
        #expect(classifier.classify(.other("reset"), requestSent: true).outcomeUnknown)
        #expect(!classifier.classify(.dnsFailed, requestSent: false).outcomeUnknown)
        #expect(!classifier.classify(.tls).outcomeUnknown)
        for status in [500, 502, 504] {
            #expect(classifier.classify(status: status)?.outcomeUnknown == true, "\(status)")
        }
        for status in [408, 429, 503, 400, 401, 404, 422] {
            #expect(classifier.classify(status: status)?.outcomeUnknown == false, "\(status)")
        }
        #expect(classifier.classifyDecoding(DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "")), context: "x").outcomeUnknown)
    }
}

/// Configured secrets are cut out of vendor-derived text in every encoding.
@Suite struct SecretRedactorTests {
    @Test func everyFormOfTheSecretIsRedacted() {
        let redactor = SecretRedactor()
        let secret = #"p@ss "w/rd" & <more>"#
        redactor.set("password", secret)
        let samples = [
            "plain \(secret) end",
            #"json {"password":"p@ss \"w/rd\" & <more>"}"#,
            #"slashes {"password":"p@ss \"w\/rd\" & <more>"}"#,
            #"twice "{\"password\":\"p@ss \\\"w/rd\\\" & <more>\"}""#,
            "html p@ss &quot;w/rd&quot; &amp; &lt;more&gt;",
            "url p%40ss%20%22w%2Frd%22%20%26%20%3Cmore%3E",
        ]
        for sample in samples {
            let out = redactor.redact(sample)
            #expect(!out.contains("p@ss") && !out.contains("p%40ss"), "\(sample) -> \(out)")
            #expect(out.contains(SecretRedactor.replacement), "\(sample) -> \(out)")
        }
        redactor.set("password", nil)
        #expect(redactor.redact(samples[0]) == samples[0])
    }

    @Test func aPasswordCutByTheExcerptLimitDoesNotLeakHalf() {
        let redactor = SecretRedactor()
        redactor.set("password", "correct-horse!")
        let classifier = ErrorClassifier(vendor: "v", settings: .init(snippetLength: 40), redactor: redactor)
        // The password straddles the 40-character excerpt limit.
        let body = Array("{\"detail\":\"Invalid credentials admin/correct-horse! (try again)\"}".utf8)
        let error = classifier.classify(status: 400, body: body)
        #expect(error?.code == .badRequest)
        #expect(error?.message.contains("correct") == false, "\(error?.message ?? "")")
    }

    @Test func tinyValuesAreNotRedacted() {
        let redactor = SecretRedactor()
        redactor.set("password", "ab")
        #expect(redactor.redact("about abc") == "about abc")
    }
}
