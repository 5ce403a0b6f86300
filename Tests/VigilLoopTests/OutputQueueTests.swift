import CLinux
import Glibc
import Testing
import VigilBytes
@testable import VigilLoop

@Suite struct OutputQueueTests {
    /// A connected pair of non-blocking Unix stream sockets with a small send buffer.
    func socketPair() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
        precondition(rc == 0)
        var size: Int32 = 4096
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(4))
        return (fds[0], fds[1])
    }

    func drain(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return out
    }

    /// The queue is part of every connection's object (docs/BENCHMARKS.md, "What an idle
    /// connection is made of"): its count and flag sit in the inline entry's padding.
    @Test func theQueueStaysSmall() {
        #expect(MemoryLayout<OutputQueue>.size <= 40)
    }

    /// The read-pause threshold is kept in 32 bits: its default and anything past them never pause.
    @Test func theReadPauseThresholdClampsToNever() throws {
        let loop = try EventLoop()
        let (a, b) = socketPair()
        defer { close(a); close(b) }
        let stream = ByteStream(fd: a, loop: loop)
        #expect(stream.pauseReadingAbove == Int(UInt32.max))
        stream.pauseReadingAbove = .max
        #expect(stream.pauseReadingAbove == Int(UInt32.max))
        stream.pauseReadingAbove = 10_000
        #expect(stream.pauseReadingAbove == 10_000)
    }

    @Test func smallWritesShareOnePooledChunkAndComeBackInOrder() {
        let (a, b) = socketPair()
        defer { close(a); close(b) }
        let pool = ChunkPool(chunkSize: 1024)
        var queue = OutputQueue()
        var expected: [UInt8] = []
        for i in 0..<10 {
            let bytes = [UInt8](repeating: UInt8(i), count: 50)
            expected += bytes
            bytes.withUnsafeBytes { queue.append($0, pool: pool) }
        }
        #expect(pool.allocated == 1)
        #expect(queue.byteCount == 500)
        let iov = UnsafeMutablePointer<iovec>.allocate(capacity: 8)
        defer { iov.deallocate() }
        #expect(queue.flush(fd: a, iovecs: iov, maxIovecs: 8, pool: pool) == .drained)
        #expect(queue.isEmpty && queue.byteCount == 0)
        #expect(pool.pooledCount == 1)  // the chunk went back
        #expect(drain(b) == expected)
    }

    @Test func aFullSocketLeavesTheRestQueuedAndResumesExactly() {
        let (a, b) = socketPair()
        defer { close(a); close(b) }
        let pool = ChunkPool(chunkSize: 1024)
        var queue = OutputQueue()
        var expected: [UInt8] = []
        for i in 0..<400 {
            let bytes = (0..<700).map { UInt8(truncatingIfNeeded: $0 &+ i) }
            expected += bytes
            if i % 3 == 0 {
                queue.append(shared: bytes.withUnsafeBytes { ByteChunk(copying: $0) })
            } else {
                bytes.withUnsafeBytes { queue.append($0, pool: pool) }
            }
        }
        let iov = UnsafeMutablePointer<iovec>.allocate(capacity: 16)
        defer { iov.deallocate() }
        var received: [UInt8] = []
        var rounds = 0
        while true {
            let result = queue.flush(fd: a, iovecs: iov, maxIovecs: 16, pool: pool)
            received += drain(b)
            rounds += 1
            if result == .drained { break }
            #expect(result == .pending)
            #expect(queue.byteCount == expected.count - received.count)
        }
        #expect(rounds > 1, "the small send buffer must have filled at least once")
        #expect(received == expected)
    }

    @Test func aPeerThatIsGoneFailsTheFlush() {
        let (a, b) = socketPair()
        close(b)
        defer { close(a) }
        signal(SIGPIPE, SIG_IGN)
        let pool = ChunkPool()
        var queue = OutputQueue()
        [UInt8](repeating: 1, count: 10).withUnsafeBytes { queue.append($0, pool: pool) }
        let iov = UnsafeMutablePointer<iovec>.allocate(capacity: 4)
        defer { iov.deallocate() }
        #expect(queue.flush(fd: a, iovecs: iov, maxIovecs: 4, pool: pool) == .failed(EPIPE))
    }

    /// One region goes out with `send(2)` (`OutputQueue.write`); a descriptor that is not a
    /// socket (ENOTSOCK) is written with `writev` instead, one region or several.
    @Test func aQueueFlushesToAPipeAsWellAsToASocket() {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        defer { close(fds[0]); close(fds[1]) }
        let pool = ChunkPool()
        let iov = UnsafeMutablePointer<iovec>.allocate(capacity: 4)
        defer { iov.deallocate() }
        var queue = OutputQueue()
        Array("one region".utf8).withUnsafeBytes { queue.append($0, pool: pool) }
        #expect(queue.flush(fd: fds[1], iovecs: iov, maxIovecs: 4, pool: pool) == .drained)
        #expect(drain(fds[0]) == Array("one region".utf8))
        let frame = Array(" and a shared one".utf8).withUnsafeBytes { ByteChunk(copying: $0) }
        Array("two regions:".utf8).withUnsafeBytes { queue.append($0, pool: pool) }
        queue.append(shared: frame)
        #expect(queue.flush(fd: fds[1], iovecs: iov, maxIovecs: 4, pool: pool) == .drained)
        #expect(drain(fds[0]) == Array("two regions: and a shared one".utf8))

        let (a, b) = socketPair()
        defer { close(a); close(b) }
        Array("over a socket".utf8).withUnsafeBytes { queue.append($0, pool: pool) }
        #expect(queue.flush(fd: a, iovecs: iov, maxIovecs: 4, pool: pool) == .drained)
        #expect(drain(b) == Array("over a socket".utf8))
    }

    @Test func oneSharedChunkServesManyQueues() {
        let pool = ChunkPool()
        let frame = [UInt8]("hello".utf8).withUnsafeBytes { ByteChunk(copying: $0) }
        var queues = [OutputQueue](repeating: OutputQueue(), count: 100)
        for i in queues.indices { queues[i].append(shared: frame) }
        #expect(queues.allSatisfy { $0.byteCount == 5 })
        #expect(pool.allocated == 0)
    }
}
