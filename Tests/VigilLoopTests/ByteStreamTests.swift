import CLinux
import Glibc
import Testing
import VigilBytes
@testable import VigilLoop

/// A stream whose owner records what it is told.
final class RecordingStream: ByteStream {
    var received: [UInt8] = []
    var peerClosedCount = 0
    var failures: [SystemError] = []
    var drainedCount = 0
    var connectedCount = 0

    override func received(_ bytes: UnsafeMutableRawBufferPointer) { received.append(contentsOf: bytes) }
    override func peerClosed() { peerClosedCount += 1 }
    override func failed(_ error: SystemError) { failures.append(error) }
    override func drained() { drainedCount += 1 }
    override func connected() { connectedCount += 1 }
}

/// Socket helpers for driving a stream from the other end.
enum Sockets {
    /// A non-blocking socketpair: (the stream's end, the test's end).
    static func pair(sendBuffer: Int32? = nil) -> (Int32, Int32) {
        ProcessLimits.ignoreSIGPIPE()  // a write to a closed peer must fail with EPIPE, not kill the tests
        var fds: [Int32] = [0, 0]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        precondition(rc == 0, "socketpair")
        if var size = sendBuffer {
            setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(4))
        }
        return (fds[0], fds[1])
    }

    /// Everything readable on `fd` now (non-blocking), and whether EOF was seen.
    static func readAll(_ fd: Int32, max: Int = .max) -> (bytes: [UInt8], eof: Bool) {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while out.count < max {
            let n = read(fd, &buffer, min(buffer.count, max - out.count))
            if n > 0 { out.append(contentsOf: buffer[0..<n]); continue }
            return (out, n == 0)
        }
        return (out, false)
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        precondition(n == bytes.count, "short write in a test")
    }

    /// The inode of the file open on `fd`, nil when none is.
    static func inode(_ fd: Int32) -> UInt? {
        var st = stat()
        return fstat(fd, &st) == 0 ? UInt(st.st_ino) : nil
    }
}

/// A started stream on one end of a socketpair, the other end for the test.
struct StreamFixture {
    let loop: EventLoop
    let stream: RecordingStream
    /// The test's end of the socketpair.
    let peer: Int32

    init(sendBuffer: Int32? = nil, pauseReadingAbove: Int = .max) throws {
        loop = try EventLoop()
        let (a, b) = Sockets.pair(sendBuffer: sendBuffer)
        stream = RecordingStream(fd: a, loop: loop)
        stream.pauseReadingAbove = pauseReadingAbove
        peer = b
        try stream.start()
    }

    /// Closes both ends (the stream's at the end of one more turn).
    func finish() throws {
        stream.close()
        try loop.turn(timeoutMs: 0)
        close(peer)
    }
}

/// `ByteStream` on real sockets (`socketpair(2)`), driven one loop turn at a time.
@Suite struct ByteStreamTests {
    @Test func bytesReadAreHandedOverAndEOFIsReported() throws {
        let f = try StreamFixture()
        let (loop, recorder, b) = (f.loop, f.stream, f.peer)
        defer { try? f.finish() }
        Sockets.write(b, Array("hello".utf8))
        try loop.turn(timeoutMs: 1_000)
        #expect(recorder.received == Array("hello".utf8))
        shutdown(b, Int32(SHUT_WR))
        try loop.turn(timeoutMs: 1_000)
        #expect(recorder.peerClosedCount == 1)
        #expect(recorder.failures.isEmpty)
    }

    @Test func outputWaitsForTheEndOfTheTurnThenGoesOutInOrder() throws {
        let f = try StreamFixture()
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        Array("one,".utf8).withUnsafeBytes { stream.append($0) }
        let p = stream.reserve(4)
        Array("two,".utf8).withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: 4) }
        stream.commit(4)
        let shared = Array("..three".utf8).withUnsafeBytes { ByteChunk(copying: $0) }
        shared.start = 2  // headroom in front of the content is not sent
        stream.append(shared: shared)
        #expect(Sockets.readAll(b).bytes.isEmpty)  // nothing leaves before the turn's flush
        #expect(stream.queuedBytes == 13)
        stream.notifyWhenDrained()
        try loop.turn(timeoutMs: 0)
        #expect(Sockets.readAll(b).bytes == Array("one,two,three".utf8))
        #expect(stream.queuedBytes == 0)
        #expect(recorder.drainedCount == 1)
    }

    /// `drained` is heard only when asked for, once: a stream nobody asked about pays one bit test.
    @Test func drainedIsCalledOnceAfterNotifyWhenDrainedAndNotOtherwise() throws {
        let f = try StreamFixture()
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        Array("one".utf8).withUnsafeBytes { stream.append($0) }
        try loop.turn(timeoutMs: 0)
        #expect(Sockets.readAll(b).bytes == Array("one".utf8) && recorder.drainedCount == 0)
        Array("two".utf8).withUnsafeBytes { stream.append($0) }
        stream.notifyWhenDrained()
        try loop.turn(timeoutMs: 0)
        #expect(recorder.drainedCount == 1)
        Array("three".utf8).withUnsafeBytes { stream.append($0) }
        try loop.turn(timeoutMs: 0)
        #expect(Sockets.readAll(b).bytes == Array("twothree".utf8) && recorder.drainedCount == 1)
    }

    @Test func aFullSocketKeepsTheRestQueuedAndTheWritableEventFinishesIt() throws {
        let f = try StreamFixture(sendBuffer: 4_096)
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        let payload = (0..<600_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        payload.withUnsafeBytes { stream.append($0) }
        stream.notifyWhenDrained()
        try loop.turn(timeoutMs: 0)
        #expect(stream.queuedBytes > 0)  // the kernel took only part of it
        #expect(recorder.drainedCount == 0)
        var got: [UInt8] = []
        for _ in 0..<10_000 where got.count < payload.count {
            got += Sockets.readAll(b).bytes
            try loop.turn(timeoutMs: 100)
        }
        #expect(got == payload)
        #expect(stream.queuedBytes == 0)
        #expect(recorder.drainedCount == 1)
    }

    @Test func readingPausesWhileTheStreamsOwnOutputIsBackedUpAndResumesWhenItDrains() throws {
        let f = try StreamFixture(sendBuffer: 4_096, pauseReadingAbove: 10_000)
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        [UInt8](repeating: 7, count: 300_000).withUnsafeBytes { stream.append($0) }
        try loop.turn(timeoutMs: 0)  // flush: the socket takes a little, the rest stays queued
        #expect(stream.queuedBytes > 10_000)
        Sockets.write(b, Array("input".utf8))
        try loop.turn(timeoutMs: 50)
        try loop.turn(timeoutMs: 50)
        #expect(recorder.received.isEmpty)  // paused: the peer must read first
        var drained = 0
        for _ in 0..<10_000 where recorder.received.isEmpty {
            drained += Sockets.readAll(b).bytes.count
            try loop.turn(timeoutMs: 100)
        }
        #expect(recorder.received == Array("input".utf8))
        #expect(stream.queuedBytes == 0)
        drained += Sockets.readAll(b).bytes.count
        #expect(drained == 300_000)
    }

    @Test func aStoppedStreamLeavesInputInTheSocketUntilItResumes() throws {
        let f = try StreamFixture()
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        stream.stopReading()
        #expect(stream.isReadingStopped)
        // The peer writes until the socket takes no more: nothing is read meanwhile.
        let chunk = [UInt8](repeating: 5, count: 4_096)
        var written = 0
        for _ in 0..<10_000 {
            let n = chunk.withUnsafeBytes { Glibc.write(b, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            written += n
            try loop.turn(timeoutMs: 0)
        }
        #expect(errno == EAGAIN)  // the peer's writes backed up
        try loop.turn(timeoutMs: 50)
        #expect(recorder.received.isEmpty)
        stream.resumeReading()
        #expect(!stream.isReadingStopped)
        for _ in 0..<10_000 where recorder.received.count < written {
            try loop.turn(timeoutMs: 100)
        }
        #expect(recorder.received.count == written)
    }

    @Test func aStoppedStreamStillReadsWhenThePeerIsGone() throws {
        let f = try StreamFixture()
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        stream.stopReading()
        Sockets.write(b, Array("bye".utf8))
        try loop.turn(timeoutMs: 50)
        #expect(recorder.received.isEmpty)
        close(b)  // both directions gone: EPOLLHUP, reported whatever the interest
        for _ in 0..<100 where recorder.peerClosedCount == 0 {
            try loop.turn(timeoutMs: 100)
        }
        #expect(recorder.received == Array("bye".utf8))
        #expect(recorder.peerClosedCount == 1)
        stream.close()
        try loop.turn(timeoutMs: 0)
    }

    @Test func shutdownAfterQueuedSendsEverythingThenFIN() throws {
        let f = try StreamFixture()
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        Array("last words".utf8).withUnsafeBytes { stream.append($0) }
        stream.shutdownWriteAfterQueued()
        #expect(Sockets.readAll(b) == ([], false))  // not before the flush
        try loop.turn(timeoutMs: 0)
        #expect(Sockets.readAll(b) == (Array("last words".utf8), true))
        // The stream still reads after shutting its write side.
        Sockets.write(b, [1, 2, 3])
        try loop.turn(timeoutMs: 1_000)
        #expect(recorder.received == [1, 2, 3])
    }

    @Test func closeDropsTheQueueAtOnceAndTheFdAtTheEndOfTheTurn() throws {
        let f = try StreamFixture()
        let (loop, stream, recorder, b) = (f.loop, f.stream, f.stream, f.peer)
        defer { try? f.finish() }
        let socket = Sockets.inode(stream.fd)
        Array("never sent".utf8).withUnsafeBytes { stream.append($0) }
        stream.close()
        #expect(stream.isClosed && stream.queuedBytes == 0)
        #expect(Sockets.inode(stream.fd) == socket)  // the number stays ours until the turn ends
        #expect(loop.registeredCount == 0)
        Sockets.write(b, [9])
        try loop.turn(timeoutMs: 0)
        // Closed (the number may already belong to another test's file: compare the inode).
        #expect(Sockets.inode(stream.fd) != socket)
        #expect(recorder.received.isEmpty && recorder.drainedCount == 0)
        #expect(Sockets.readAll(b).bytes.isEmpty)  // the queued bytes were dropped, not sent
    }

    @Test func anEpollCtlFailureIsReportedNotDropped() throws {
        let loop = try EventLoop()
        let (a, b) = Sockets.pair()
        let stream = RecordingStream(fd: a, loop: loop)
        let recorder = stream
        try stream.start()
        // Put a pipe's write end on fd `a` behind the loop's back (dup2 closes the socket in the same
        // step, so no other test can take the number meanwhile): epoll forgets the closed socket, so
        // changing the interest of fd `a` now fails with ENOENT.
        var pipeFds: [Int32] = [0, 0]
        #expect(pipe(&pipeFds) == 0)
        let (readEnd, writeEnd) = (pipeFds[0], pipeFds[1])
        _ = fcntl(writeEnd, F_SETFL, O_NONBLOCK)
        #expect(dup2(writeEnd, a) == a)
        close(writeEnd)
        close(b)
        defer { close(readEnd) }
        // More than a pipe holds: the flush leaves output queued and asks for EPOLLOUT.
        [UInt8](repeating: 1, count: 200_000).withUnsafeBytes { stream.append($0) }
        try loop.turn(timeoutMs: 0)
        try loop.turn(timeoutMs: 0)
        #expect(recorder.failures.map(\.call) == ["epoll_ctl(MOD)"])
        #expect(recorder.failures.first?.errno == ENOENT)
    }

    @Test func aClientStreamReportsItsConnectAndARefusal() throws {
        let loop = try EventLoop()
        let listener = try Socket.listen(on: ListenAddress(host: "127.0.0.1", port: 0), backlog: 4)
        let port = try #require(Socket.localPort(listener))
        let stream = RecordingStream(fd: try Socket.connect(to: ListenAddress(host: "127.0.0.1", port: port)), loop: loop)
        let recorder = stream
        try stream.start(connecting: true)
        Array("queued before connect".utf8).withUnsafeBytes { stream.append($0) }
        for _ in 0..<100 where recorder.connectedCount == 0 { try loop.turn(timeoutMs: 100) }
        #expect(recorder.connectedCount == 1)
        try loop.turn(timeoutMs: 0)
        let accepted = vigil_accept(listener)
        #expect(accepted >= 0)
        var got: [UInt8] = []
        for _ in 0..<100 where got.count < 21 {
            got += Sockets.readAll(accepted).bytes
            if got.count < 21 { try loop.turn(timeoutMs: 10) }
        }
        #expect(got == Array("queued before connect".utf8))
        stream.close()
        close(accepted)
        close(listener)  // the port is free again: a second connect is refused
        let refused = RecordingStream(fd: try Socket.connect(to: ListenAddress(host: "127.0.0.1", port: port)), loop: loop)
        let second = refused
        try refused.start(connecting: true)
        for _ in 0..<100 where second.failures.isEmpty { try loop.turn(timeoutMs: 100) }
        #expect(second.failures.map(\.call) == ["connect"])
        #expect(second.failures.first?.errno == ECONNREFUSED)
        refused.close()
        try loop.turn(timeoutMs: 0)
    }
}
