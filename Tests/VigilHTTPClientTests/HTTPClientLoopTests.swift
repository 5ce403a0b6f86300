import Glibc
import Testing
import VigilLoop
@testable import VigilHTTPClient

/// What a stalled service costs the loop: nothing but its sockets. Another stream's echo on the
/// same loop keeps coming back within a turn or two while requests to a stalled server wait.
@Suite(.serialized) struct HTTPClientLoopTests {
    /// Echoes what it reads.
    final class EchoStream: ByteStream {
        override func received(_ bytes: UnsafeMutableRawBufferPointer) { append(UnsafeRawBufferPointer(bytes)) }
    }

    @Test func aStalledServerDoesNotDelayTheLoop() throws {
        let rig = try Rig()
        // Two stalled requests, one by name (resolved off the loop), each holding a connection.
        rig.send("/stall", timeoutMs: 1_500)
        rig.send("/stall", host: "localhost", timeoutMs: 1_500)
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let echo = EchoStream(fd: fds[0], loop: rig.loop)
        try echo.start()
        defer { echo.close() }
        var worstTurns = 0, worstMs: Int64 = 0, rounds = 0
        let end = monotonicMilliseconds() + 1_000
        while monotonicMilliseconds() < end {
            let sent = monotonicMilliseconds()
            _ = write(fds[1], "ping", 4)
            var got = 0, turns = 0
            var buffer = [UInt8](repeating: 0, count: 16)
            while got < 4 && turns < 50 {
                try rig.loop.turn(timeoutMs: 100)
                turns += 1
                let n = read(fds[1], &buffer, buffer.count)
                if n > 0 { got += n }
            }
            #expect(got == 4)
            worstTurns = max(worstTurns, turns)
            worstMs = max(worstMs, monotonicMilliseconds() - sent)
            rounds += 1
        }
        #expect(rig.outcomes.count == 0, "both still stalled")
        #expect(rig.client.snapshot.inFlight == 2)
        #expect(worstTurns <= 2, "an echo took \(worstTurns) turns")
        #expect(worstMs < 50, "an echo took \(worstMs) ms")
        #expect(rounds > 100)
        print("echo beside two stalled requests: \(rounds) round trips in 1 s, worst \(worstTurns) turns, \(worstMs) ms")
        // And the stalled requests end at their deadline, as requests.
        #expect(try rig.wait(for: 2))
        #expect(rig.outcomes.failure(0) == .timeout(.awaitingResponse) && rig.outcomes.failure(1) == .timeout(.awaitingResponse))
    }
}
