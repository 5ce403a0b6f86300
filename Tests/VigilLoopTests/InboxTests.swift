import Foundation
import Glibc
import Testing
@testable import VigilLoop

/// `Inbox`: messages posted from other threads reach the loop thread, in order, and wake the loop.
@Suite struct InboxTests {
    @Test func aPostFromAnotherThreadWakesTheLoopAndArrivesInOrder() throws {
        let loop = try EventLoop()
        let inbox = try Inbox<Int>()
        var got: [Int] = []
        let receiver = try inbox.receive(on: loop) { got.append($0) }
        let thread = Thread {
            for i in 1...100 { inbox.post(i) }
        }
        thread.start()
        // Each turn blocks until the eventfd wakes it: no sleeping here.
        for _ in 0..<200 where got.count < 100 { try loop.turn(timeoutMs: 5_000) }
        #expect(got == Array(1...100))
        receiver.cancel()
    }

    @Test func waitBlocksUntilSomethingIsPostedAndTimesOutOtherwise() throws {
        let inbox = try Inbox<String>()
        #expect(inbox.wait(timeoutMs: 10).isEmpty)
        let thread = Thread { inbox.post("done") }
        thread.start()
        #expect(inbox.wait(timeoutMs: 10_000) == ["done"])
        #expect(inbox.takeAll().isEmpty)
    }
}
