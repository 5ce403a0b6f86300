import Testing
import VigilWire
@testable import VigilHTTPClient

/// The pool's decisions, driven as a value: no sockets, no clock.
@Suite struct HTTPPoolTests {
    static let a = try! OutgoingURL(parsing: "https://a.example/").origin
    static let b = try! OutgoingURL(parsing: "https://b.example/").origin

    static func pool(perOrigin: Int = 2, perOriginQueued: Int = 3, total: Int = 8, totalQueued: Int = 100,
                     totalBytes: Int = 10_000) -> HTTPPool {
        HTTPPool(HTTPPool.Limits(perOriginConnections: perOrigin, perOriginQueued: perOriginQueued, totalConnections: total,
                                 totalQueued: totalQueued, totalQueuedBytes: totalBytes))
    }

    /// A pool where requests 0 and 1 of origin a are in flight on connections 0 and 1.
    static func twoInFlight(total: Int = 8) -> HTTPPool {
        var pool = Self.pool(perOrigin: 2, total: total)
        _ = pool.enqueue(0, to: a, bytes: 1)
        _ = pool.enqueue(1, to: a, bytes: 1)
        _ = pool.connectionReady(0)
        _ = pool.connectionReady(1)
        return pool
    }

    @Test func requestsOpenConnectionsUpToTheOriginsBoundThenWait() {
        var pool = Self.pool()
        #expect(pool.enqueue(0, to: Self.a, bytes: 10) == [.open(0, Self.a)])
        #expect(pool.enqueue(1, to: Self.a, bytes: 10) == [.open(1, Self.a)])
        #expect(pool.enqueue(2, to: Self.a, bytes: 10) == [])
        #expect(pool.queued(at: Self.a) == 3 && pool.connections(of: Self.a) == 2)
        // The first connection up takes the head of the queue.
        #expect(pool.connectionReady(1) == [.assign(request: 0, connection: 1)])
        #expect(pool.connectionReady(0) == [.assign(request: 1, connection: 0)])
        // Done and kept alive: the next in line.
        #expect(pool.connectionReady(1) == [.assign(request: 2, connection: 1)])
        #expect(pool.queuedCount == 0 && pool.queuedBytes == 0)
    }

    @Test func theMostRecentlyUsedIdleConnectionGoesFirst() {
        var pool = Self.twoInFlight()
        _ = pool.connectionReady(0)  // 0 done: idle after 1
        _ = pool.connectionReady(1)  // 1 done: idle last
        #expect(pool.enqueue(2, to: Self.a, bytes: 1) == [.assign(request: 2, connection: 1)])
    }

    @Test func queueBounds() {
        var pool = Self.pool(perOrigin: 1, perOriginQueued: 2, totalQueued: 3, totalBytes: 100)
        #expect(pool.enqueue(0, to: Self.a, bytes: 10) == [.open(0, Self.a)])
        #expect(pool.enqueue(1, to: Self.a, bytes: 10) == [])
        #expect(pool.enqueue(2, to: Self.a, bytes: 10) == [.fail(2, .queueFull(.origin))])
        #expect(pool.enqueue(3, to: Self.b, bytes: 10) == [.open(1, Self.b)])
        #expect(pool.enqueue(4, to: Self.b, bytes: 10) == [.fail(4, .queueFull(.total))])
        var bytes = Self.pool()
        #expect(bytes.enqueue(0, to: Self.a, bytes: 9_000) == [.open(0, Self.a)])
        #expect(bytes.enqueue(1, to: Self.b, bytes: 1_001) == [.fail(1, .queueFull(.total))])
        #expect(bytes.enqueue(2, to: Self.b, bytes: 1_000) == [.open(1, Self.b)])
    }

    @Test func aFailedAttemptFailsTheQueueWhenNothingElseCanServeIt() {
        var pool = Self.pool(perOrigin: 1)
        _ = pool.enqueue(0, to: Self.a, bytes: 1)
        _ = pool.enqueue(1, to: Self.a, bytes: 1)
        #expect(pool.connectionClosed(0, attemptFailure: .dns("Name or service not known"))
                == [.fail(0, .dns("Name or service not known")), .fail(1, .dns("Name or service not known"))])
        #expect(pool.queuedCount == 0 && pool.connectionCount == 0)
        // The next request tries again.
        #expect(pool.enqueue(2, to: Self.a, bytes: 1) == [.open(0, Self.a)])
    }

    @Test func aFailedAttemptBesideABusyConnectionLeavesTheQueueWaiting() {
        var pool = Self.pool(perOrigin: 2)
        _ = pool.enqueue(0, to: Self.a, bytes: 1)
        _ = pool.enqueue(1, to: Self.a, bytes: 1)
        #expect(pool.connectionReady(0) == [.assign(request: 0, connection: 0)])
        // The second attempt fails while the first connection is busy: no new attempt (no spin).
        #expect(pool.connectionClosed(1, attemptFailure: .connect("Connection refused")) == [])
        #expect(pool.queued(at: Self.a) == 1)
        #expect(pool.connectionReady(0) == [.assign(request: 1, connection: 0)])
    }

    @Test func aKeptAliveConnectionTheServerClosedIsReplacedWhenRequestsWait() {
        var pool = Self.pool(perOrigin: 1)
        _ = pool.enqueue(0, to: Self.a, bytes: 1)
        _ = pool.enqueue(1, to: Self.a, bytes: 1)
        _ = pool.connectionReady(0)
        // Its response said Connection: close.
        #expect(pool.connectionClosed(0, attemptFailure: nil) == [.open(0, Self.a)])
        #expect(pool.connectionReady(0) == [.assign(request: 1, connection: 0)])
    }

    @Test func theTotalBoundClosesTheLongestIdleConnectionOfAnotherOrigin() {
        var pool = Self.twoInFlight(total: 2)
        _ = pool.connectionReady(1)  // 1 done first: idle longest
        _ = pool.connectionReady(0)
        #expect(pool.enqueue(2, to: Self.b, bytes: 1) == [.closeIdle(1), .open(1, Self.b)])
        #expect(pool.connections(of: Self.a) == 1 && pool.connections(of: Self.b) == 1)
    }

    @Test func withNoIdleConnectionAnOriginWaitsForTheNextToEnd() {
        var pool = Self.twoInFlight(total: 2)
        #expect(pool.enqueue(2, to: Self.b, bytes: 1) == [])
        // One of a's finishes: with a's queue empty, it idles, and b takes its room.
        #expect(pool.connectionReady(0) == [.closeIdle(0), .open(0, Self.b)])
        #expect(pool.connectionReady(0) == [.assign(request: 2, connection: 0)])
        // Or: one of a's ends (its response said Connection: close).
        var other = Self.twoInFlight(total: 2)
        #expect(other.enqueue(2, to: Self.b, bytes: 1) == [])
        #expect(other.connectionClosed(1, attemptFailure: nil) == [.open(1, Self.b)])
    }

    @Test func aWithdrawnRequestLeavesTheQueue() {
        var pool = Self.pool(perOrigin: 1)
        _ = pool.enqueue(0, to: Self.a, bytes: 5)
        _ = pool.enqueue(1, to: Self.a, bytes: 7)
        let first = pool.withdraw(0, from: Self.a), again = pool.withdraw(0, from: Self.a)
        #expect(first && !again)
        #expect(pool.queuedCount == 1 && pool.queuedBytes == 7)
        #expect(pool.connectionReady(0) == [.assign(request: 1, connection: 0)])
    }

    @Test func anOriginWithNothingLeftIsForgotten() {
        var pool = Self.pool()
        _ = pool.enqueue(0, to: Self.a, bytes: 1)
        _ = pool.connectionReady(0)
        _ = pool.connectionClosed(0, attemptFailure: nil)
        #expect(pool.connectionCount == 0 && pool.connections(of: Self.a) == 0 && pool.queued(at: Self.a) == 0)
        #expect(pool.connectionClosed(0, attemptFailure: nil) == [], "an unknown connection changes nothing")
    }
}
