import Glibc
import Testing
import VigilBytes
@testable import VigilLoop

/// The end-of-turn flush writes the streams that hold an answer of their own (a reply, copied
/// in) before those that hold only shared fan-out frames, whatever order they were queued in,
/// and every peer still receives its own bytes in order.
@Suite struct FlushOrderTests {
    /// Records the order in which streams of one loop are written (their `drained`, asked for
    /// with `notifyWhenDrained` once their queue holds bytes).
    final class OrderedStream: ByteStream {
        let name: String
        let log: Log
        init(_ name: String, fd: Int32, loop: EventLoop, log: Log) {
            self.name = name
            self.log = log
            super.init(fd: fd, loop: loop)
        }
        /// Run once, the first time this stream's queue drains (what a stream's owner may do then).
        var onDrained: (() -> Void)?
        override func drained() {
            log.names.append(name)
            onDrained?()
            onDrained = nil
        }
    }

    final class Log { var names: [String] = [] }

    @Test func answersAreWrittenBeforeTheFanOut() throws {
        let loop = try EventLoop()
        let log = Log()
        var streams: [OrderedStream] = []
        var peers: [Int32] = []
        for name in ["s1", "s2", "publisher", "s3", "other"] {
            let (a, b) = Sockets.pair()
            let stream = OrderedStream(name, fd: a, loop: loop, log: log)
            try stream.start()
            streams.append(stream)
            peers.append(b)
        }
        defer {
            for s in streams { s.close() }
            try? loop.turn(timeoutMs: 0)
            for p in peers { close(p) }
        }
        let event = Array("event".utf8).withUnsafeBytes { ByteChunk(copying: $0) }
        // The order a fan-out queues things in: subscribers' events, then a reply (queued after the
        // first event had reached every subscriber), then more events; and a stream that got an
        // event before its own reply.
        streams[0].append(shared: event)
        streams[1].append(shared: event)
        Array("ok".utf8).withUnsafeBytes { streams[2].append($0) }
        streams[3].append(shared: event)
        streams[4].append(shared: event)
        Array("ok".utf8).withUnsafeBytes { streams[4].append($0) }
        streams[2].append(shared: event)
        for s in streams { s.notifyWhenDrained() }
        try loop.turn(timeoutMs: 0)

        #expect(log.names == ["publisher", "s1", "s2", "s3", "other"])
        #expect(Sockets.readAll(peers[2]).bytes == Array("okevent".utf8))
        #expect(Sockets.readAll(peers[4]).bytes == Array("eventok".utf8))
        for i in [0, 1, 3] { #expect(Sockets.readAll(peers[i]).bytes == Array("event".utf8)) }
    }

    /// What a flush queues (here: a fan-out stream's drain makes another stream answer its peer)
    /// goes out in the same turn, not at the next event.
    @Test func whatAFlushQueuesGoesOutInTheSameTurn() throws {
        let loop = try EventLoop()
        let log = Log()
        let (a1, b1) = Sockets.pair(), (a2, b2) = Sockets.pair()
        let subscriber = OrderedStream("subscriber", fd: a1, loop: loop, log: log)
        let other = OrderedStream("other", fd: a2, loop: loop, log: log)
        try subscriber.start()
        try other.start()
        defer {
            subscriber.close()
            other.close()
            try? loop.turn(timeoutMs: 0)
            close(b1)
            close(b2)
        }
        let event = Array("event".utf8).withUnsafeBytes { ByteChunk(copying: $0) }
        subscriber.append(shared: event)
        subscriber.notifyWhenDrained()
        subscriber.onDrained = {
            Array("late".utf8).withUnsafeBytes { other.append($0) }
            other.notifyWhenDrained()
        }
        try loop.turn(timeoutMs: 0)
        #expect(log.names == ["subscriber", "other"])
        #expect(Sockets.readAll(b2).bytes == Array("late".utf8))
    }
}
