import Testing
@testable import VigilLoop

/// Names resolved on the resolver's threads, answered on the loop.
@Suite struct NameResolverTests {
    @Test func everyRequestIsAnsweredOnTheLoopWithItsID() throws {
        let loop = try EventLoop()
        var answers: [UInt64: Result<[String], NameResolver.Failure>] = [:]
        let resolver = try NameResolver(threads: 2, threadName: "test-dns", loop: loop) { answers[$0.id] = $0.result }
        defer { resolver.stop() }
        resolver.resolve(NameResolver.Request(id: 1, host: "localhost", port: 80))
        // RFC 6761: .invalid never resolves.
        resolver.resolve(NameResolver.Request(id: 2, host: "nowhere.invalid", port: 80))
        // Waiting beside id 1 for the same name: one lookup may answer both.
        resolver.resolve(NameResolver.Request(id: 3, host: "localhost", port: 80))
        let deadline = monotonicMilliseconds() + 10_000
        while answers.count < 3 && monotonicMilliseconds() < deadline { try loop.turn(timeoutMs: 50) }
        #expect(Set(answers.keys) == [1, 2, 3])
        #expect((try? answers[1]?.get())?.contains("127.0.0.1") == true)
        #expect((try? answers[3]?.get())?.contains("127.0.0.1") == true)
        guard case .failure(let failure)? = answers[2] else { return #expect(Bool(false)) }
        #expect(!failure.reason.contains("nowhere"), "a reason never names the host")
    }

    @Test func aStoppedResolverTakesNoMore() throws {
        let loop = try EventLoop()
        var answered = 0
        let resolver = try NameResolver(threadName: "test-dns", loop: loop) { _ in answered += 1 }
        resolver.stop()
        resolver.resolve(NameResolver.Request(id: 1, host: "localhost", port: 80))
        try loop.turn(timeoutMs: 100)
        #expect(answered == 0)
    }
}
