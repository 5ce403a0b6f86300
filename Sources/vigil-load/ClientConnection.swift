import CLinux
import Glibc
import VigilLoad
import VigilLoop
import VigilWire

/// What a scenario hears from its connections. Called on the loop thread.
protocol ClientDelegate: AnyObject {
    /// The handshake completed; the connection may send.
    func opened(_ connection: ClientConnection)
    /// One complete text message (the bytes are valid only during the call).
    func message(_ connection: ClientConnection, _ bytes: UnsafeRawBufferPointer)
    /// The connection is gone: `failure` is nil after a clean close we asked for.
    func closed(_ connection: ClientConnection, failure: String?)
}

/// A WebSocket client connection (RFC 6455 client side) on the project's own event loop and codec.
///
/// Frames it sends are masked (§5.3, a fresh key per frame); frames it reads must not be. Sends are
/// queued and flushed once per loop turn by `ClientPool`, like the server's connections, so a burst
/// of messages costs one `writev`. A message spread over several reads is assembled in `partial`;
/// one that arrives whole is handed over straight from the loop's shared read buffer.
final class ClientConnection: EventHandler {
    enum Phase { case connecting, handshaking, open, closing, closed }

    let fd: Int32
    /// The scenario's index for this connection (its role and slot).
    let tag: Int
    private(set) var phase = Phase.connecting
    /// Whether the handshake ever completed (a failure before it is a connect failure).
    private(set) var everOpen = false
    unowned let pool: ClientPool
    weak var delegate: ClientDelegate?
    private let key: String
    private var response = HTTPResponseParser()
    private var reader: MessageReader
    private var output = OutputQueue()
    private var partial: [UInt8] = []
    private var queuedForFlush = false
    private var waitingWritable = false
    /// Monotonic ns when the connect started (handshake timeout, connect latency).
    let startedNs: UInt64
    private var rng: SplitMix64

    init(fd: Int32, tag: Int, pool: ClientPool, delegate: ClientDelegate, seed: UInt64) {
        self.fd = fd
        self.tag = tag
        self.pool = pool
        self.delegate = delegate
        self.startedNs = Clock.nowNs()
        self.rng = SplitMix64(state: seed)
        var keyBytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<16 { keyBytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
        key = Crypto.base64Encode(keyBytes)
        reader = MessageReader(role: .client, maxMessageBytes: 16 << 20)
        reader.validatesText = pool.validateText
    }

    var isOpen: Bool { phase == .open }
    var queuedBytes: Int { output.byteCount }

    // MARK: sending

    /// Queues one masked text frame.
    func sendText(_ payload: [UInt8]) {
        guard phase == .open else { return }
        payload.withUnsafeBytes { queueFrame(.text, $0) }
    }

    private func queueFrame(_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) {
        let maskKey = UInt32(truncatingIfNeeded: rng.next()) | 1
        let header = FrameEncoder.headerSize(payloadCount: payload.count, masked: true)
        let total = header + payload.count
        let p = output.reserve(total, pool: pool.chunks)
        let written = FrameEncoder.writeHeader(into: p, opcode: opcode, fin: true, rsv1: false,
                                               payloadCount: payload.count, maskKey: maskKey)
        if let base = payload.baseAddress, payload.count > 0 {
            (p + written).copyMemory(from: base, byteCount: payload.count)
            FrameEncoder.applyMask(UnsafeMutableRawBufferPointer(start: p + written, count: payload.count), key: maskKey, phase: 0)
        }
        output.commit(total)
        scheduleFlush()
    }

    private func queueRaw(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { output.append($0, pool: pool.chunks) }
        scheduleFlush()
    }

    private func scheduleFlush() {
        if !queuedForFlush && !waitingWritable {
            queuedForFlush = true
            pool.needsFlush(self)
        }
    }

    /// Called by the pool at the end of the loop turn.
    func flush() {
        queuedForFlush = false
        guard phase != .closed, phase != .connecting else { return }
        switch output.flush(fd: fd, iovecs: pool.iovecs, maxIovecs: ClientPool.maxIovecs, pool: pool.chunks) {
        case .drained:
            if waitingWritable {
                waitingWritable = false
                pool.loop.modify(fd: fd, events: [.readable])
            }
        case .pending:
            if !waitingWritable {
                waitingWritable = true
                pool.loop.modify(fd: fd, events: [.readable, .writable])
            }
        case .failed(let e):
            finish(failure: "write: \(String(cString: strerror(e)))")
        }
    }

    /// Starts the closing handshake (code 1000); the connection finishes when the server answers.
    func close() {
        switch phase {
        case .open:
            phase = .closing
            let payload = FrameEncoder.closePayload(code: .normal, reason: "")
            payload.withUnsafeBytes { queueFrame(.close, $0) }
        case .connecting, .handshaking:
            finish(failure: nil)
        case .closing, .closed:
            break
        }
    }

    /// Gives up on a connect or handshake that took too long.
    func failHandshake() {
        finish(failure: phase == .connecting ? "connect timeout" : "handshake timeout")
    }

    /// Drops the connection at once (no closing handshake): a phone going out of coverage.
    func abort() {
        finish(failure: nil)
    }

    // MARK: events

    func handleEvents(_ events: IOEvents) {
        if phase == .connecting {
            guard events.contains(.writable) || events.contains(.error) || events.contains(.hangup) else { return }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { return finish(failure: "connect: \(String(cString: strerror(error)))") }
            phase = .handshaking
            pool.loop.modify(fd: fd, events: [.readable])
            queueRaw(Handshake.clientRequest(host: pool.hostHeader, path: pool.path, key: key, subprotocols: []))
            return
        }
        if events.contains(.writable) && waitingWritable {
            flush()
            if phase == .closed { return }
        }
        if events.contains(.readable) || events.contains(.hangup) || events.contains(.error) {
            readAvailable()
        }
    }

    private func readAvailable() {
        let buffer = pool.loop.readBuffer
        // Bounded per wake-up so one busy connection cannot starve the others.
        for _ in 0..<4 {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n > 0 {
                consume(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
                if phase == .closed || n < buffer.count { return }
            } else if n == 0 {
                return finish(failure: phase == .closing ? nil : "server closed the TCP connection")
            } else {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                return finish(failure: "read: \(String(cString: strerror(errno)))")
            }
        }
    }

    private func consume(_ bytes: UnsafeMutableRawBufferPointer) {
        var offset = 0
        if phase == .handshaking {
            switch response.feed(UnsafeRawBufferPointer(bytes)) {
            case .needMore:
                return
            case .failure(let message):
                return finish(failure: "handshake: \(message)")
            case .complete(let head, let leftover):
                guard Handshake.checkResponse(head, key: key) else {
                    return finish(failure: "handshake: status \(head.statusCode)")
                }
                phase = .open
                everOpen = true
                pool.connectionOpened()
                offset = bytes.count - leftover
                delegate?.opened(self)
                if phase != .open { return }
            }
        }
        var single: UnsafeRawBufferPointer?
        while phase == .open || phase == .closing {
            switch reader.next(bytes, offset: &offset) {
            case .needMore:
                if let chunk = single { partial.append(contentsOf: chunk) }
                return
            case .messageStart:
                partial.removeAll(keepingCapacity: true)
                single = nil
            case .messageData(let chunk):
                if single == nil && partial.isEmpty {
                    single = chunk
                } else {
                    if let s = single { partial.append(contentsOf: s); single = nil }
                    partial.append(contentsOf: chunk)
                }
            case .messageEnd:
                if phase == .open {
                    if let s = single {
                        delegate?.message(self, s)
                    } else {
                        partial.withUnsafeBytes { delegate?.message(self, $0) }
                    }
                }
                single = nil
                partial.removeAll(keepingCapacity: partial.capacity <= 4096)
            case .ping(let payload):
                if phase == .open { payload.withUnsafeBytes { queueFrame(.pong, $0) } }
            case .pong:
                break
            case .close(let code, let reason):
                if phase == .open {
                    // The server closes first: answer (best effort, §5.5.1) and report why.
                    let echo = FrameEncoder.closePayload(code: .normal, reason: "")
                    echo.withUnsafeBytes { queueFrame(.close, $0) }
                    _ = output.flush(fd: fd, iovecs: pool.iovecs, maxIovecs: ClientPool.maxIovecs, pool: pool.chunks)
                    return finish(failure: "server closed: \(code.map(String.init) ?? "no code") \(reason)")
                }
                return finish(failure: nil)
            case .failure(let error):
                return finish(failure: "protocol: \(error.reason)")
            }
        }
    }

    private func finish(failure: String?) {
        guard phase != .closed else { return }
        let wasOpen = phase == .open || phase == .closing
        phase = .closed
        pool.loop.deregister(fd: fd)
        Glibc.close(fd)
        output.removeAll(pool: pool.chunks)
        pool.connectionClosed(self, wasOpen: wasOpen)
        delegate?.closed(self, failure: failure)
    }
}
