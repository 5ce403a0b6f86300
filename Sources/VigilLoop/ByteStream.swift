import CLinux
import COpenSSL
import Glibc
import VigilBytes

/// One connection's I/O, owned in one place: the fd, its output queue, its epoll interest, the
/// read into the loop's shared buffer, the `writev`, TLS, shutdown and close.
///
/// uSockets' shape: the stream does the I/O and its owner only hears `received`, `peerClosed`,
/// `failed` (and `connected`, `drained`). vigild's connections and vigil-load's client
/// connections both are streams, so neither keeps its own flush, interest or read logic.
///
/// The owner subclasses the stream and overrides those methods (uSockets keeps a socket's owner
/// data in the socket's own allocation for the same reason): a connection is then one heap
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
/// - The owner may stop reading altogether (`stopReading`, `resumeReading`): the load client's
///   stalled readers, which let the kernel's buffers fill as a phone that stops reading does.
/// - `close()` releases the queue at once and the fd at the end of the turn.
///
/// The transport: `readSome` and `writeQueued` are the only places that move bytes between the
/// kernel and the stream. With a `TLSContext` they go through OpenSSL on the same socket: the
/// handshake runs first, non-blocking, with OpenSSL's WANT_READ / WANT_WRITE mapped onto the
/// epoll interest; reads decrypt into the shared buffer; writes hand the queue's head to
/// `SSL_write` (small frames coalesced into one record of up to 16 KiB), and a write that must be
/// retried is retried with the same bytes, which stay at the head of the queue until written.
/// The owner sees the same callbacks, plaintext in and out, either way.
open class ByteStream: EventHandler {
    /// The loop outlives every stream registered on it (the server and the load client close all
    /// their streams before they let the loop go), so the reference is not counted: a stream is
    /// created per connection and `unowned(unsafe)` spares the atomic retain/release that every
    /// send would otherwise pay on it (measured with perf in the fan-out profile: plain `unowned`
    /// cost 12% of the daemon's time on the connection's server reference, the same pattern).
    /// Held as `Unmanaged` rather than `unowned(unsafe)`: reading an `unowned(unsafe)` reference
    /// still retained and released the loop around each `queuedBytes` update (one atomic pair per
    /// fan-out recipient, seen in the disassembly of `append(shared:)`); `withLoop` lends it at +0.
    private let loopRef: Unmanaged<EventLoop>
    private var loop: EventLoop { loopRef.takeUnretainedValue() }
    private var output = OutputQueue()
    // The small fields right after the queue (40 bytes) and the 8-byte field last, so that this
    // part ends on an 8-byte boundary with 2 bytes of padding and the subclass's fields start
    // without any (this object is allocated per connection: benchmarks/idle_anatomy.sh; 96 bytes
    // after the object header, 112 when the queue's count and this threshold were 64-bit).
    private var state: State = []
    public let fd: Int32
    private var interest: IOEvents = []
    /// An `epoll_ctl` failure noticed while changing interest, reported at the flush (not from
    /// inside whatever call changed the interest, so the owner is never re-entered).
    private var pendingFailure: Int32 = 0
    /// Bytes of the queue's head handed to an `SSL_write` that must be retried (0: none).
    private var pendingTLSWrite: Int32 = 0
    /// Unsent bytes above which reading pauses; 32 bits like the queue's count (in the 4 bytes
    /// the fields before leave empty), so its largest value, the default, never pauses.
    private var pauseAbove = UInt32.max
    /// The TLS session (OpenSSL's `SSL*`), nil for a plain stream.
    private var tls: OpaquePointer?

    /// Unsent bytes above which reading pauses (the default never pauses; values past 32 bits
    /// count as the default).
    public var pauseReadingAbove: Int {
        get { Int(pauseAbove) }
        set { pauseAbove = UInt32(clamping: newValue) }
    }

    private struct State: OptionSet {
        let rawValue: UInt16
        static let connecting = State(rawValue: 1 << 0)
        static let queuedForFlush = State(rawValue: 1 << 1)
        static let waitingWritable = State(rawValue: 1 << 2)
        static let readPaused = State(rawValue: 1 << 3)
        static let writeShut = State(rawValue: 1 << 4)
        static let closed = State(rawValue: 1 << 5)
        static let shutWhenDrained = State(rawValue: 1 << 6)
        /// The TLS handshake is not finished: nothing is read or written for the owner yet.
        static let tlsHandshaking = State(rawValue: 1 << 7)
        /// A server stream has not yet seen the client's first byte (a TLS record, or plain HTTP).
        static let tlsAwaitingHello = State(rawValue: 1 << 8)
        /// OpenSSL wants the socket writable to go on reading or handshaking.
        static let tlsWantsWrite = State(rawValue: 1 << 9)
        /// The owner stopped reading (`stopReading`) until it resumes.
        static let readStopped = State(rawValue: 1 << 10)
        /// The TLS handshake under way was started mid-stream (`startTLS`): its end is reported
        /// as `upgradedToTLS`, not `connected`.
        static let tlsUpgrade = State(rawValue: 1 << 11)
        /// The owner asked to hear `drained` once the queue is empty (`notifyWhenDrained`).
        static let notifyDrained = State(rawValue: 1 << 12)
    }

    /// Wraps a connected (or, with `connecting`, connecting) non-blocking socket. Nothing happens
    /// until `start`.
    public init(fd: Int32, loop: EventLoop) {
        self.fd = fd
        self.loopRef = Unmanaged.passUnretained(loop)
    }

    deinit {
        if let tls { SSL_free(tls) }
    }

    // MARK: what the owner hears (override)

    /// A non-blocking connect finished (client streams only), TLS handshake included when there is one.
    open func connected() {}

    /// Bytes read into the loop's shared buffer: valid only during the call, and the owner may
    /// change them in place (a WebSocket unmasks there).
    open func received(_ bytes: UnsafeMutableRawBufferPointer) {}

    /// The peer shut its write side (read returned 0, or TLS close_notify). The default closes the stream.
    open func peerClosed() { close() }

    /// A system call on the stream failed: `connect`, `read`, `writev`, `epoll_ctl`, or a TLS step
    /// (then `errno` is EPROTO and `detail` holds OpenSSL's reasons). The stream is not closed by
    /// itself; the default closes it.
    open func failed(_ error: SystemError) { close() }

    /// Every queued byte is in the kernel: called once after `notifyWhenDrained`, from the flush
    /// that emptied the queue (so the owner may queue more, paced by the peer's reading).
    open func drained() {}

    /// The TLS handshake begun by `startTLS` completed: bytes now move encrypted.
    open func upgradedToTLS() {}

    /// A server stream expecting TLS got plain bytes instead (an `http://` client on the `wss://`
    /// port). TLS is dropped from the stream, so what the owner sends now goes out as plaintext: a
    /// short error response, then close. The default closes at once.
    open func plaintextOnTLSPort() { close() }

    /// Registers with the loop and starts reporting. With `connecting`, the stream first waits for
    /// the non-blocking connect to finish. With `tls`, a TLS session in the context's role is set
    /// up on the socket and its handshake runs before anything reaches the owner.
    /// A client session with `verifyName` checks the server's certificate carries that name.
    public final func start(connecting: Bool = false, tls context: TLSContext? = nil, verifyName: String? = nil) throws(SystemError) {
        if connecting { state.insert(.connecting) }
        if let context {
            do {
                tls = try context.makeSession(fd: fd, verifyName: verifyName)
            } catch {
                throw SystemError("TLS session", errno: ENOMEM, detail: error.description)
            }
            state.insert(.tlsHandshaking)
            if context.isServer { state.insert(.tlsAwaitingHello) }
        }
        interest = wantedInterest
        try loop.register(fd: fd, events: interest, handler: self)
    }

    /// Upgrades a connected plaintext client stream to TLS (the NATS protocol: plaintext INFO,
    /// then TLS on the same socket). Nothing already queued may be waiting (it would go out in
    /// plaintext before the upgrade or encrypted after it: neither is what the owner meant); the
    /// handshake runs non-blocking from the next writable event, reading and writing for the
    /// owner stop until it completes, and `upgradedToTLS` (or `failed`) reports the end. Bytes
    /// the owner queues meanwhile go out encrypted after the handshake. `verifyName` is the name
    /// (or IP address) the server's certificate must carry.
    public final func startTLS(_ context: TLSContext, verifyName: String?) throws(SystemError) {
        precondition(!context.isServer, "a mid-stream upgrade is the client's")
        guard tls == nil, !state.contains(.connecting), !state.contains(.closed) else {
            throw SystemError("TLS upgrade", errno: EINVAL, detail: "the stream is not a connected plaintext stream")
        }
        guard output.byteCount == 0 else {
            throw SystemError("TLS upgrade", errno: EINVAL, detail: "plaintext output is still queued")
        }
        do {
            tls = try context.makeSession(fd: fd, verifyName: verifyName)
        } catch {
            throw SystemError("TLS session", errno: ENOMEM, detail: error.description)
        }
        // The ClientHello goes out on the next writable event (at once on a connected socket).
        state.formUnion([.tlsHandshaking, .tlsUpgrade, .tlsWantsWrite])
        updateInterest()
    }

    /// Bytes queued and not yet taken by the kernel.
    public var queuedBytes: Int { output.byteCount }
    public var isClosed: Bool { state.contains(.closed) }
    /// Whether bytes can move for the owner: no TLS, or its handshake is done.
    public var isTransportReady: Bool { !state.contains(.tlsHandshaking) }
    public var usesTLS: Bool { tls != nil }

    /// The ALPN protocol the TLS handshake selected ("" when none, or for a plain stream).
    public var negotiatedALPN: String {
        guard let tls else { return "" }
        var buffer = [CChar](repeating: 0, count: 64)
        vigil_ssl_alpn_selected(tls, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: output

    /// A pointer where `n` contiguous bytes may be written; `commit(n)` after writing them.
    public final func reserve(_ n: Int) -> UnsafeMutableRawPointer {
        output.reserve(n, pool: loop.chunks)
    }

    /// Adds the `n` bytes written at the pointer the last `reserve` returned, for this turn's flush.
    public final func commit(_ n: Int) {
        output.commit(n)
        loop.queuedBytes += n
        if state.isDisjoint(with: [.queuedForFlush, .closed]) { addToFlushList(answer: true) }
    }

    /// Copies `bytes` into the queue.
    public final func append(_ bytes: UnsafeRawBufferPointer) {
        output.append(bytes, pool: loop.chunks)
        loop.queuedBytes += bytes.count
        if state.isDisjoint(with: [.queuedForFlush, .closed]) { addToFlushList(answer: true) }
    }

    /// Queues a reference to an immutable chunk shared with other streams (no copy); `tag`, when
    /// not 0, lets a later `removeUnsent(tag:)` take it back while it is still unsent.
    public final func append(shared chunk: ByteChunk, tag: UInt64 = 0) {
        append(shared: chunk, from: chunk.start, to: chunk.count, tag: tag)
    }

    /// Queues a reference to `chunk`'s immutable bytes `start ..< end`, shared with other
    /// streams; consecutive ranges of one chunk become one queue entry (`OutputQueue`'s merge rule).
    ///
    /// The memory bound: while the socket is full (the last flush left bytes unsent), a range
    /// that is a small part of its chunk is copied instead (`OutputQueue.isSparse`), as the
    /// entries already queued were when that flush went pending (`copySparseEntries`), so that a
    /// slow reader never keeps a fan-out's whole arena alive for the few frames it still owes.
    public final func append(shared chunk: ByteChunk, from start: Int, to end: Int, tag: UInt64 = 0) {
        let n = end - start
        if _slowPath(state.contains(.waitingWritable)) && OutputQueue.isSparse(chunk, length: n) {
            let bytes = UnsafeRawBufferPointer(start: chunk.base + start, count: n)
            if tag == 0 {
                output.append(bytes, pool: loop.chunks)
            } else {
                output.append(shared: ByteChunk(copying: bytes), tag: tag)
            }
        } else {
            output.append(shared: chunk, from: start, to: end, tag: tag)
        }
        loopRef._withUnsafeGuaranteedRef { $0.queuedBytes += n }
        scheduleFlush()
    }

    /// Takes back the unsent bytes queued with `tag` (a newer message makes them moot); returns
    /// how many bytes that was.
    public final func removeUnsent(tag: UInt64) -> Int {
        let removed = output.removeUnsent(tag: tag, keepingHead: pendingTLSWrite > 0, pool: loop.chunks)
        loop.queuedBytes -= removed
        return removed
    }

    /// Drops every byte not yet sent, but a frame already started (the peer keeps seeing whole
    /// frames); returns how many bytes that was. For a connection closed for falling behind.
    public final func discardUnsent() -> Int {
        let dropped = output.discardUnsent(keepingHead: pendingTLSWrite > 0, pool: loop.chunks)
        loop.queuedBytes -= dropped
        return dropped
    }

    /// Asks for one `drained()` call when a flush next leaves nothing queued. The queue must hold
    /// bytes now (a flush is then due: at the end of the turn, or on the writable event), else
    /// nothing will call it. A flag bit, so a stream nobody asked about pays one test per flush.
    public final func notifyWhenDrained() {
        state.insert(.notifyDrained)
    }

    /// Inlined: a fan-out recipient's later events in a turn find it scheduled already (one test).
    @inline(__always)
    private func scheduleFlush() {
        guard state.isDisjoint(with: [.queuedForFlush, .closed]) else { return }
        addToFlushList(answer: false)
    }

    /// `answer`: bytes of this stream's own (copied in, not a shared fan-out frame), flushed
    /// before the turn's fan-out (`EventLoop.turn`).
    @inline(never)
    private func addToFlushList(answer: Bool) {
        state.insert(.queuedForFlush)
        loop.scheduleFlush(self, answer: answer)
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
        // Waiting for EPOLLOUT (the socket is full, the writable event will flush), for the
        // connect, or for the TLS handshake (which flushes when it completes).
        guard state.isDisjoint(with: [.waitingWritable, .connecting, .tlsHandshaking]) else { return }
        flush()
    }

    private func flush() {
        switch writeQueued() {
        case .drained:
            state.remove(.waitingWritable)
            state.remove(.readPaused)
            if state.contains(.shutWhenDrained) { shutdownWrite() }
            updateInterest()
            if state.contains(.notifyDrained) {
                state.remove(.notifyDrained)
                drained()
            }
        case .pending:
            if !state.contains(.waitingWritable) {
                // Falling behind: the frames still owed stop pinning shared chunks (`append(shared:from:to:)`).
                // The head is copied too when a TLS write waits on it: the same bytes elsewhere
                // are allowed (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, `TLSContext`).
                output.copySparseEntries(pool: loop.chunks)
            }
            state.insert(.waitingWritable)
            if output.byteCount > pauseReadingAbove { state.insert(.readPaused) }
            updateInterest()
        case .failed(let error):
            failed(SystemError(tls == nil ? "writev" : "SSL_write", errno: error, detail: tlsDetail(error)))
        }
    }

    // MARK: the transport

    /// Reads once into the loop's shared buffer: a byte count, 0 at end of stream, or -errno.
    private func readSome(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        if let tls { return tlsRead(tls, buffer) }
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno == EINTR { continue }
            return -Int(errno)
        }
    }

    /// Writes as much of the queue as the kernel takes.
    private func writeQueued() -> FlushResult {
        let before = output.byteCount
        defer {
            loop.queuedBytes -= before - output.byteCount
            loop.bytesWritten += before - output.byteCount
        }
        if let tls { return tlsWrite(tls) }
        return output.flush(fd: fd, iovecs: loop.iovecs, maxIovecs: EventLoop.maxIovecs, pool: loop.chunks)
    }

    /// One `SSL_read` (at most one record, 16 KiB, so OpenSSL never holds decrypted bytes that
    /// the 64 KiB buffer did not take: level-triggered epoll stays truthful).
    private func tlsRead(_ tls: OpaquePointer, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
        ERR_clear_error()
        let n = SSL_read(tls, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if n > 0 { return Int(n) }
        switch SSL_get_error(tls, n) {
        case SSL_ERROR_WANT_READ:
            return -Int(EAGAIN)
        case SSL_ERROR_WANT_WRITE:
            state.insert(.tlsWantsWrite)
            updateInterest()
            return -Int(EAGAIN)
        case SSL_ERROR_ZERO_RETURN:
            return 0  // close_notify
        case SSL_ERROR_SYSCALL:
            return errno == 0 ? 0 : -Int(errno)  // 0: EOF without close_notify, a common way to hang up
        default:
            return -Int(EPROTO)  // OpenSSL's reasons stay in its error queue for the report
        }
    }

    /// OpenSSL's reasons for a TLS failure just reported by `tlsRead` or `tlsWrite` (its error
    /// queue, read right away), nil for a plain stream.
    private func tlsDetail(_ errno: Int32) -> String? {
        guard tls != nil, errno == EPROTO else { return nil }
        return TLSError("").reasons.joined(separator: "; ")
    }

    private func tlsWrite(_ tls: OpaquePointer) -> FlushResult {
        while output.byteCount > 0 {
            let head: UnsafeRawBufferPointer
            if pendingTLSWrite > 0 {
                // OpenSSL's rule: retry with the same bytes (they are still the queue's head).
                head = output.coalescedHead(limit: Int(pendingTLSWrite), pool: loop.chunks)
            } else {
                head = output.coalescedHead(limit: 16_384, pool: loop.chunks)
            }
            ERR_clear_error()
            let n = SSL_write(tls, head.baseAddress, Int32(head.count))
            if n > 0 {
                pendingTLSWrite = 0
                output.consumeSent(Int(n), pool: loop.chunks)
                continue
            }
            switch SSL_get_error(tls, n) {
            case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ:
                pendingTLSWrite = Int32(head.count)
                return .pending
            case SSL_ERROR_SYSCALL:
                return .failed(errno == 0 ? EPIPE : errno)
            default:
                return .failed(EPROTO)  // OpenSSL's reasons stay in its error queue for the report
            }
        }
        return .drained
    }

    /// Advances the TLS handshake; true once it is complete.
    private func driveHandshake(_ tls: OpaquePointer) -> Bool {
        ERR_clear_error()
        let rc = SSL_do_handshake(tls)
        if rc == 1 {
            state.remove(.tlsHandshaking)
            state.remove(.tlsWantsWrite)
            updateInterest()
            if state.contains(.connecting) == false, output.byteCount > 0 { scheduleFlush() }
            return true
        }
        switch SSL_get_error(tls, rc) {
        case SSL_ERROR_WANT_READ:
            state.remove(.tlsWantsWrite)
            updateInterest()
        case SSL_ERROR_WANT_WRITE:
            state.insert(.tlsWantsWrite)
            updateInterest()
        case SSL_ERROR_SYSCALL where errno == 0:
            peerClosed()  // the peer hung up during the handshake
        default:
            var detail = TLSError("TLS handshake").description
            let verify = SSL_get_verify_result(tls)
            if verify != 0, let reason = X509_verify_cert_error_string(verify) {
                detail += " (the peer's certificate: \(String(cString: reason)))"
            }
            failed(SystemError("TLS handshake", errno: errno == 0 ? EPROTO : errno, detail: detail))
        }
        return false
    }

    /// A server's first look at a new connection: a TLS record starts with 0x16 (handshake); an
    /// `http://` client sends ASCII (a method name). Peeked, not read.
    private func checkForPlaintext() -> Bool {
        var first: UInt8 = 0
        let n = recv(fd, &first, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return true }
            failed(SystemError("recv"))
            return false
        }
        if n == 0 {
            peerClosed()
            return false
        }
        state.remove(.tlsAwaitingHello)
        if first != 0x16 {
            if let tls { SSL_free(tls) }
            tls = nil
            state.remove(.tlsHandshaking)
            updateInterest()
            plaintextOnTLSPort()
            return false
        }
        return true
    }

    // MARK: events

    public final func handleEvents(_ events: IOEvents) {
        if state.contains(.connecting) {
            guard !events.isDisjoint(with: [.writable, .error, .hangup]) else { return }
            finishConnect()
            return
        }
        if state.contains(.tlsHandshaking), let tls {
            if state.contains(.tlsAwaitingHello) {
                guard checkForPlaintext(), state.contains(.tlsHandshaking) else { return }
            }
            guard driveHandshake(tls), !state.contains(.closed) else { return }
            // A server goes on to read: the client's request may already be in the socket.
            if tlsIsClient {
                if state.contains(.tlsUpgrade) {
                    state.remove(.tlsUpgrade)
                    upgradedToTLS()
                } else {
                    connected()
                }
                if state.contains(.closed) { return }
            }
        }
        if events.contains(.writable) {
            if state.contains(.tlsWantsWrite) {
                // A read was waiting for the socket to become writable: read again.
                state.remove(.tlsWantsWrite)
                updateInterest()
                readAvailable()
                if state.contains(.closed) { return }
            }
            if state.contains(.waitingWritable) {
                flush()
                if state.contains(.closed) { return }
            }
        }
        if !events.isDisjoint(with: [.readable, .readHangup, .hangup, .error]) && !state.contains(.readPaused) {
            // A stopped stream is not read, unless the socket is gone both ways (EPOLLHUP and
            // EPOLLERR are reported whatever the interest: ignoring them would spin the loop).
            if state.contains(.readStopped) && events.isDisjoint(with: [.hangup, .error]) { return }
            readAvailable()
        }
    }

    /// Stops reading: the socket's receive buffer fills and the peer's writes back up, as with a
    /// peer that stops reading. Only a hangup or an error is still read (and reported).
    public final func stopReading() {
        guard !state.contains(.closed) else { return }
        state.insert(.readStopped)
        updateInterest()
    }

    /// Reads again after `stopReading`: what waited in the socket arrives from the next turn.
    public final func resumeReading() {
        guard state.contains(.readStopped) else { return }
        state.remove(.readStopped)
        updateInterest()
    }

    public var isReadingStopped: Bool { state.contains(.readStopped) }

    /// Whether this stream's TLS session is in the client role.
    private var tlsIsClient: Bool {
        guard let tls else { return false }
        return SSL_is_server(tls) == 0
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
        if let tls {
            // The ClientHello goes out now; `connected` follows the handshake.
            guard driveHandshake(tls), !state.contains(.closed) else { return }
        }
        connected()
        // Output queued before the connect finished (a handshake request) goes out with this turn.
        if output.byteCount > 0, !state.contains(.closed) { scheduleFlush() }
    }

    private func readAvailable() {
        let buffer = loop.readBuffer
        for _ in 0..<loop.readsPerWake {
            let n = readSome(buffer)
            if n > 0 {
                loop.bytesRead += n
                received(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
                if state.contains(.closed) { return }
                // The owner started a TLS upgrade: what follows is the handshake's.
                if state.contains(.tlsHandshaking) { return }
                if output.byteCount > pauseReadingAbove { break }
                // A short read drained the socket; with TLS, a full record may still be waiting
                // in the kernel, and epoll (level-triggered) says so next turn.
                if n < buffer.count && tls == nil { break }
            } else if n == 0 {
                peerClosed()
                return
            } else if -n == Int(EAGAIN) || -n == Int(EWOULDBLOCK) {
                break
            } else {
                failed(SystemError(tls == nil ? "read" : "SSL_read", errno: Int32(-n), detail: tlsDetail(Int32(-n))))
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
        var events: IOEvents = []
        if !state.contains(.readStopped) || state.contains(.tlsHandshaking) {
            events.insert(.readHangup)
            if !state.contains(.readPaused) || state.contains(.tlsHandshaking) { events.insert(.readable) }
        }
        if state.contains(.waitingWritable) || state.contains(.tlsWantsWrite) { events.insert(.writable) }
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

    /// Sends FIN (after TLS's close_notify, on a TLS stream) after the bytes already given to the
    /// kernel; the stream keeps reading.
    public final func shutdownWrite() {
        guard !state.contains(.writeShut), !state.contains(.closed) else { return }
        state.insert(.writeShut)
        if let tls, !state.contains(.tlsHandshaking) {
            ERR_clear_error()
            _ = SSL_shutdown(tls)  // sends close_notify; the peer's is not awaited
        }
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
        if output.byteCount > 0 && isTransportReady { _ = writeQueued() }
        close()
    }

    /// Drops whatever is still queued, stops all events and closes the fd at the end of the turn.
    /// Idempotent; nothing is reported to the owner after it.
    public final func close() {
        guard !state.contains(.closed) else { return }
        state.insert(.closed)
        loop.queuedBytes -= output.byteCount
        output.removeAll(pool: loop.chunks)
        if let tls {
            SSL_free(tls)  // SSL_set_fd's socket BIO does not close the fd
            self.tls = nil
        }
        loop.closeAfterTurn(fd)
    }
}
