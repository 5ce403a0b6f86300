import CLinux
import Glibc
import VigilBytes

/// One connection's I/O, owned in one place: the fd, its output queue, its epoll interest, the
/// read into the loop's shared buffer, the `writev`, shutdown and close.
///
/// uSockets' shape: the stream does the I/O and its owner only hears `received`, `peerClosed`,
/// `failed` (and `connected`, `drained`). vigild's connections and vigil-load's client
/// connections both are streams, so neither keeps its own flush, interest or read logic.
///
/// The owner subclasses the stream and overrides those five methods (uSockets keeps a socket's
/// owner data in the socket's own allocation for the same reason): a connection is then one heap
/// object, not a connection and a stream pointing at each other. That saved about 100 bytes per
/// idle connection (benchmarks/compare_builds.py, docs/BENCHMARKS.md). The callbacks run on the
/// loop thread, from the stream's event handling or from the end-of-turn flush; an owner may
/// send, pause or close the stream from any of them.
///
/// - Output is queued during the turn (`append`, `reserve`/`commit`) and written at the end of
///   the turn, one `writev` per stream (`EventLoop` step 4). If the socket is full the rest stays
///   queued, EPOLLOUT is watched, and the next writable event flushes again.
/// - Reading pauses while the stream's own unsent output passes `pauseReadingAbove` (a peer that
///   sends but never reads must not make us buffer without bound) and resumes once it drains.
/// - `close()` releases the queue at once and the fd at the end of the turn.
///
/// The transport seam: `readSome` and `writeQueued` are the only places that move bytes between
/// the kernel and the stream; a TLS transport replaces those two (encrypting the queue's bytes on
/// their way out, decrypting into the shared buffer on their way in) and adds the handshake's own
/// interest, leaving the queue, the flush schedule and the owner's callbacks as they are.
open class ByteStream: EventHandler {
    /// The loop outlives every stream registered on it (the server and the load client close all
    /// their streams before they let the loop go), so the reference is not counted: a stream is
    /// created per connection and `unowned(unsafe)` spares the atomic retain/release that every
    /// send would otherwise pay on it (measured with perf in the fan-out profile: plain `unowned`
    /// cost 12% of the daemon's time on the connection's server reference, the same pattern).
    private unowned(unsafe) let loop: EventLoop
    private var output = OutputQueue()
    /// Unsent bytes above which reading pauses (the default never pauses).
    public var pauseReadingAbove = Int.max
    // The small fields last, packed together (this object is allocated per connection).
    public let fd: Int32
    private var interest: IOEvents = []
    /// An `epoll_ctl` failure noticed while changing interest, reported at the flush (not from
    /// inside whatever call changed the interest, so the owner is never re-entered).
    private var pendingFailure: Int32 = 0
    private var state: State = []

    private struct State: OptionSet {
        let rawValue: UInt8
        static let connecting = State(rawValue: 1)
        static let queuedForFlush = State(rawValue: 2)
        static let waitingWritable = State(rawValue: 4)
        static let readPaused = State(rawValue: 8)
        static let writeShut = State(rawValue: 16)
        static let closed = State(rawValue: 32)
        static let shutWhenDrained = State(rawValue: 64)
    }

    /// Wraps a connected (or, with `connecting`, connecting) non-blocking socket. Nothing happens
    /// until `start`.
    public init(fd: Int32, loop: EventLoop) {
        self.fd = fd
        self.loop = loop
    }

    // MARK: what the owner hears (override)

    /// A non-blocking connect finished (client streams only).
    open func connected() {}

    /// Bytes read into the loop's shared buffer: valid only during the call, and the owner may
    /// change them in place (a WebSocket unmasks there).
    open func received(_ bytes: UnsafeMutableRawBufferPointer) {}

    /// The peer shut its write side (read returned 0). The default closes the stream.
    open func peerClosed() { close() }

    /// A system call on the stream failed: `connect`, `read`, `writev` or `epoll_ctl`. The stream
    /// is not closed by itself; the default closes it.
    open func failed(_ error: SystemError) { close() }

    /// Every queued byte is in the kernel (after a flush that had something to write).
    open func drained() {}

    /// Registers with the loop and starts reporting. With `connecting`, the stream first waits for
    /// the non-blocking connect to finish (`connected()` or `failed`).
    public final func start(connecting: Bool = false) throws(SystemError) {
        if connecting { state.insert(.connecting) }
        interest = wantedInterest
        try loop.register(fd: fd, events: interest, handler: self)
    }

    /// Bytes queued and not yet taken by the kernel.
    public var queuedBytes: Int { output.byteCount }
    public var isClosed: Bool { state.contains(.closed) }

    // MARK: output

    /// A pointer where `n` contiguous bytes may be written; `commit(n)` after writing them.
    public final func reserve(_ n: Int) -> UnsafeMutableRawPointer {
        output.reserve(n, pool: loop.chunks)
    }

    /// Adds the `n` bytes written at the pointer the last `reserve` returned, for this turn's flush.
    public final func commit(_ n: Int) {
        output.commit(n)
        scheduleFlush()
    }

    /// Copies `bytes` into the queue.
    public final func append(_ bytes: UnsafeRawBufferPointer) {
        output.append(bytes, pool: loop.chunks)
        scheduleFlush()
    }

    /// Queues a reference to an immutable chunk shared with other streams (no copy).
    public final func append(shared chunk: ByteChunk) {
        output.append(shared: chunk)
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !state.contains(.queuedForFlush), !state.contains(.closed) else { return }
        state.insert(.queuedForFlush)
        loop.scheduleFlush(self)
    }

    /// The loop's step 4.
    func flushAtEndOfTurn() {
        state.remove(.queuedForFlush)
        guard !state.contains(.closed) else { return }
        if pendingFailure != 0 {
            let error = pendingFailure
            pendingFailure = 0
            failed(SystemError("epoll_ctl(MOD)", errno: error))
            return
        }
        // Waiting for EPOLLOUT: the socket is full, the writable event will flush.
        guard !state.contains(.waitingWritable), !state.contains(.connecting) else { return }
        flush()
    }

    private func flush() {
        switch writeQueued() {
        case .drained:
            state.remove(.waitingWritable)
            state.remove(.readPaused)
            if state.contains(.shutWhenDrained) { shutdownWrite() }
            updateInterest()
            drained()
        case .pending:
            state.insert(.waitingWritable)
            if output.byteCount > pauseReadingAbove { state.insert(.readPaused) }
            updateInterest()
        case .failed(let error):
            failed(SystemError("writev", errno: error))
        }
    }

    // MARK: the transport seam

    /// Reads once into the loop's shared buffer: a byte count, 0 at end of stream, or -errno.
    private func readSome(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            return -Int(errno)
        }
    }

    /// Writes as much of the queue as the kernel takes.
    private func writeQueued() -> FlushResult {
        output.flush(fd: fd, iovecs: loop.iovecs, maxIovecs: EventLoop.maxIovecs, pool: loop.chunks)
    }

    // MARK: events

    public final func handleEvents(_ events: IOEvents) {
        if state.contains(.connecting) {
            guard !events.isDisjoint(with: [.writable, .error, .hangup]) else { return }
            finishConnect()
            return
        }
        if events.contains(.writable) && state.contains(.waitingWritable) {
            flush()
            if state.contains(.closed) { return }
        }
        if !events.isDisjoint(with: [.readable, .readHangup, .hangup, .error]) && !state.contains(.readPaused) {
            readAvailable()
        }
    }

    private func finishConnect() {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 { error = errno }
        if error != 0 {
            failed(SystemError("connect", errno: error))
            return
        }
        state.remove(.connecting)
        updateInterest()
        connected()
        // Output queued before the connect finished (a handshake request) goes out with this turn.
        if output.byteCount > 0, !state.contains(.closed) { scheduleFlush() }
    }

    private func readAvailable() {
        let buffer = loop.readBuffer
        for _ in 0..<loop.readsPerWake {
            let n = readSome(buffer)
            if n > 0 {
                received(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
                if state.contains(.closed) || n < buffer.count { break }
                if output.byteCount > pauseReadingAbove { break }
            } else if n == 0 {
                peerClosed()
                return
            } else if -n == Int(EAGAIN) || -n == Int(EWOULDBLOCK) {
                break
            } else {
                failed(SystemError("read", errno: Int32(-n)))
                return
            }
        }
        if !state.contains(.closed), output.byteCount > pauseReadingAbove, !state.contains(.readPaused) {
            state.insert(.readPaused)
            updateInterest()
        }
    }

    // MARK: interest, shutdown, close

    private var wantedInterest: IOEvents {
        if state.contains(.connecting) { return [.writable] }
        var events: IOEvents = [.readHangup]
        if !state.contains(.readPaused) { events.insert(.readable) }
        if state.contains(.waitingWritable) { events.insert(.writable) }
        return events
    }

    private func updateInterest() {
        guard !state.contains(.closed) else { return }
        let wanted = wantedInterest
        guard wanted != interest else { return }
        do {
            try loop.modify(fd: fd, events: wanted)
            interest = wanted
        } catch {
            pendingFailure = error.errno
            scheduleFlush()
        }
    }

    /// Sends FIN after the bytes already given to the kernel; the stream keeps reading.
    public final func shutdownWrite() {
        guard !state.contains(.writeShut), !state.contains(.closed) else { return }
        state.insert(.writeShut)
        Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    /// Sends FIN once every byte queued so far has reached the kernel (at once when none is
    /// waiting); the stream keeps reading. Nothing may be queued after it.
    public final func shutdownWriteAfterQueued() {
        if output.byteCount == 0 {
            shutdownWrite()
        } else {
            state.insert(.shutWhenDrained)
        }
    }

    /// Writes what the kernel takes of the queue now (one attempt, no waiting), then closes: a
    /// best-effort last frame on a connection that is going anyway.
    public final func closeAfterWritingQueued() {
        guard !state.contains(.closed) else { return }
        if output.byteCount > 0 { _ = writeQueued() }
        close()
    }

    /// Drops whatever is still queued, stops all events and closes the fd at the end of the turn.
    /// Idempotent; nothing is reported to the owner after it.
    public final func close() {
        guard !state.contains(.closed) else { return }
        state.insert(.closed)
        output.removeAll(pool: loop.chunks)
        loop.closeAfterTurn(fd)
    }
}
