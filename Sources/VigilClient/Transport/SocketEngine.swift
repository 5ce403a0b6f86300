#if os(Linux)
import Foundation
import Glibc
import VigilWire

/// The socket thread of one connection: connect, TLS, the opening handshake, then the frame loop.
///
/// Everything here runs on that thread alone (`start` is the only call from elsewhere), which is
/// why the class is `@unchecked Sendable`: the compiler cannot see that the thread it starts is
/// the only one that touches its fields after `start`. Other threads reach it only through
/// `core` (a mutex and the wake pipe).
///
/// One turn of the frame loop, in order: take the requests (frames, a close, an abort); write
/// what is queued until the kernel refuses more; wait in `poll` for the socket (readable; writable
/// while bytes wait), the wake pipe or the close deadline; read and decode what arrived.
final class SocketEngine: @unchecked Sendable {
    let core: ConnectionCore
    private let endpoint: Endpoint
    private let options: SocketTransport.Options
    private let attempt: ConnectAttempt
    /// The connect deadline (monotonic ms).
    private let connectDeadline: UInt64
    private var fd: Int32 = -1
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var tls: TLSClientSession?
    private var messages: MessageAssembler
    /// Ciphertext (TLS) or bytes (plain) read from the socket.
    private var socketBuffer = [UInt8](repeating: 0, count: 64 << 10)
    /// Bytes for the frame decoder (plaintext under TLS).
    private var appBuffer = [UInt8](repeating: 0, count: 64 << 10)
    /// Bytes for the socket, from `wireOffset` on.
    private var wire: [UInt8] = []
    private var wireOffset = 0
    /// Frames not yet moved to `wire` (encrypted under TLS).
    private var frames: [[UInt8]] = []
    private var framesHead = 0
    /// Frame bytes moved to `wire`, and those of them the kernel has taken, counted from the start.
    private var moved = 0
    private var flushed = 0
    private var queued = 0
    /// `send` calls waiting for their frame to be written: the frame's end in `queued` terms.
    private var pendingSends: [(end: Int, continuation: CheckedContinuation<Result<Void, TransportError>, Never>)] = []
    /// The closing handshake's rules; the loop carries out the actions it returns.
    private var closing: ClosingHandshake
    /// The reader has no room: the socket is not read until it makes some.
    private var readPaused = false
    /// Under TLS, OpenSSL may hold decrypted bytes `poll` cannot see: read again before waiting.
    private var mayHaveInput = false
    /// Where the pongs not yet written end (in `queued` terms). A server that pings without
    /// reading would otherwise grow our queue of pongs without bound; past `maxUnsentPongs` a
    /// ping goes unanswered (RFC 6455 §5.5.3 lets an endpoint answer only some of a burst).
    private var unsentPongEnds: [Int] = []
    private static let maxUnsentPongs = 16

    init(endpoint: Endpoint, options: SocketTransport.Options, timeout: Duration, attempt: ConnectAttempt) throws(TransportError) {
        // The wake "pipe" is a socket pair: `pipe2` (for its flags) is not in Glibc's module.
        var pipeFDs: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pipeFDs) == 0 else {
            throw .connectFailed("socketpair: " + String(cString: strerror(errno)))
        }
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        self.endpoint = endpoint
        self.options = options
        self.attempt = attempt
        connectDeadline = Self.nowMs() + Self.milliseconds(timeout)
        core = ConnectionCore(wakeFD: wakeWrite, receiveBufferBytes: max(1, options.receiveBufferBytes),
                              pingObserver: options.pingObserver)
        messages = MessageAssembler(reader: MessageReader(role: .client, maxMessageBytes: options.maxMessageBytes))
        closing = ClosingHandshake(timeoutMs: Self.milliseconds(options.closeTimeout))
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "vigil-socket"
        thread.start()
    }

    private func run() {
        let subprotocol: String?
        switch openConnection() {
        case .failure(let error):
            end(error)
            attempt.resolve(.failure(error))
            return
        case .success(let selected):
            subprotocol = selected
        }
        // The handle is made here and handed over; if the attempt was already decided (timed
        // out, cancelled), dropping it aborts the connection, and the loop below ends at once.
        let opened = attempt.resolve(.success(SocketConnection(core: core, subprotocol: subprotocol)))
        if !opened {
            end(.closed(code: nil, reason: "aborted"))
            return
        }
        frameLoop()
    }

    // MARK: opening

    private enum Wait { case ready, timedOut, aborted }

    /// Waits until the socket is ready for `events`, the connect deadline passes or the attempt
    /// is aborted (the wake pipe).
    private func wait(for events: Int16) -> Wait {
        while true {
            let now = Self.nowMs()
            guard now < connectDeadline else { return .timedOut }
            var fds = [pollfd(fd: fd, events: events, revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, Int32(clamping: connectDeadline - now))
            if n < 0 && errno != EINTR { return .timedOut }
            if fds[1].revents != 0 {
                ConnectionCore.drainWakePipe(wakeRead)
                if core.takeAbortedDuringConnect() { return .aborted }
            }
            if fds[0].revents != 0 { return .ready }
        }
    }

    private func openConnection() -> Result<String?, TransportError> {
        do throws(TransportError) {
            try connectTCP()
            if endpoint.secure { try handshakeTLS() }
            return .success(try upgrade())
        } catch {
            return .failure(error)
        }
    }

    private func connectTCP() throws(TransportError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &list)
        guard status == 0, let first = list else {
            throw .connectFailed("cannot resolve \(endpoint.host): " + String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var failures: [String] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry?.pointee {
            entry = info.ai_next
            let address = Self.describe(info.ai_addr, info.ai_addrlen)
            let s = socket(info.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), info.ai_protocol)
            guard s >= 0 else {
                failures.append("\(address): socket: " + String(cString: strerror(errno)))
                continue
            }
            fd = s
            if Glibc.connect(s, info.ai_addr, info.ai_addrlen) != 0 && errno != EINPROGRESS {
                failures.append("\(address): " + String(cString: strerror(errno)))
                closeSocket()
                continue
            }
            switch wait(for: Int16(POLLOUT)) {
            case .timedOut:
                closeSocket()
                throw .timedOut
            case .aborted:
                closeSocket()
                throw .connectFailed("cancelled")
            case .ready:
                break
            }
            var soError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(s, SOL_SOCKET, SO_ERROR, &soError, &length)
            if soError != 0 {
                failures.append("\(address): " + String(cString: strerror(soError)))
                closeSocket()
                continue
            }
            var one: Int32 = 1
            setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return
        }
        throw .connectFailed(failures.isEmpty ? "no address for \(endpoint.host)" : failures.joined(separator: "; "))
    }

    private func handshakeTLS() throws(TransportError) {
        let session = try TLSClientSession(host: endpoint.host, trustedPEMFiles: options.trustedCertificateFiles,
                                           trustedPEM: options.trustedCertificatesPEM)
        tls = session
        while true {
            let step = session.handshake()
            session.drainOutput(into: &wire)
            try writeAllDuringConnect()
            switch step {
            case .done:
                return
            case .closed:
                throw .tls("the server closed TLS during the handshake")
            case .failed(let why):
                throw .tls(why)
            case .wantRead:
                switch readSocket() {
                case .bytes(let n):
                    socketBuffer.withUnsafeBytes { session.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                case .wouldBlock:
                    try waitDuringConnect(for: Int16(POLLIN))
                case .end:
                    throw .tls("the server closed the connection during the TLS handshake")
                case .failed(let why):
                    throw .tls(why)
                }
            }
        }
    }

    /// Sends the upgrade request and reads the response head; returns the selected subprotocol.
    /// Bytes after the head (the server's first frames) stay in `appBuffer` for the frame loop.
    private func upgrade() throws(TransportError) -> String? {
        let key = Crypto.base64Encode(SecureRandom.bytes(count: 16))
        let request = Handshake.clientRequest(host: endpoint.hostHeader, path: endpoint.target, key: key,
                                              subprotocols: options.subprotocols)
        guard queueWire(request) else { throw .tls(TLSClientSession.reasons("TLS write failed")) }
        try writeAllDuringConnect()
        var parser = HTTPResponseParser(maxHeadBytes: 8192, maxHeaderCount: 100)
        while true {
            switch readApp() {
            case .bytes(let n):
                let parsed = appBuffer.withUnsafeBytes { parser.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                switch parsed {
                case .needMore:
                    continue
                case .failure(let why):
                    throw .handshake("malformed response: \(why)")
                case .complete(let head, let leftover):
                    let selected = try Self.check(head, key: key, offered: options.subprotocols)
                    // The server's first frames (vigild's welcome) may share the head's read.
                    decode((n - leftover, n))
                    return selected
                }
            case .wouldBlock:
                try waitDuringConnect(for: Int16(POLLIN))
            case .end:
                throw .handshake("the server closed the connection before answering the upgrade")
            case .failed(let why):
                throw endpoint.secure ? .tls(why) : .connectFailed(why)
            }
        }
    }

    /// RFC 6455 §4.1's checks of the server's answer, each with its own reason.
    static func check(_ head: HTTPResponseHead, key: String, offered: [String]) throws(TransportError) -> String? {
        guard head.statusCode == 101 else {
            throw .handshake("status \(head.statusCode)" + (head.reason.isEmpty ? "" : " \(head.reason)"))
        }
        guard head.tokens("upgrade").contains("websocket") else { throw .handshake("101 without Upgrade: websocket") }
        guard head.tokens("connection").contains("upgrade") else { throw .handshake("101 without Connection: Upgrade") }
        guard Handshake.checkResponse(head, key: key) else { throw .handshake("Sec-WebSocket-Accept does not match the key") }
        guard head.values("sec-websocket-extensions").isEmpty else {
            throw .handshake("the server agreed to an extension that was not offered")
        }
        let protocols = head.values("sec-websocket-protocol")
        guard protocols.count <= 1 else { throw .handshake("more than one Sec-WebSocket-Protocol") }
        if let selected = protocols.first {
            guard offered.contains(selected) else { throw .handshake("the server selected subprotocol \(selected), not offered") }
            return selected
        }
        return nil
    }

    /// `Sec-WebSocket-Accept` for a key (the tests' stand-in servers answer with it).
    static func acceptValue(forKey key: String) -> String {
        Handshake.acceptValue(forKey: key)
    }

    private func waitDuringConnect(for events: Int16) throws(TransportError) {
        switch wait(for: events) {
        case .ready: return
        case .timedOut: throw .timedOut
        case .aborted: throw .connectFailed("cancelled")
        }
    }

    private func writeAllDuringConnect() throws(TransportError) {
        while wireOffset < wire.count {
            switch writeSocket() {
            case .progress: continue
            case .wouldBlock: try waitDuringConnect(for: Int16(POLLOUT))
            case .failed(let why): throw endpoint.secure ? .tls(why) : .connectFailed(why)
            }
        }
    }

    // MARK: the frame loop

    private func frameLoop() {
        while true {
            let requests = core.takeRequests()
            if requests.aborted, let final = perform(closing.aborted()) { return end(final) }
            readPaused = requests.readPaused
            for outgoing in requests.frames {
                guard closing.isOpen else {
                    outgoing.continuation.resume(returning: .failure(closing.report ?? .closed(code: nil, reason: "the connection is closing")))
                    continue
                }
                queued += outgoing.frame.count
                frames.append(outgoing.frame)
                pendingSends.append((queued, outgoing.continuation))
            }
            if let close = requests.close {
                _ = perform(closing.closeRequested(code: close.code, reason: close.reason, nowMs: Self.nowMs()))
            }

            // Write.
            if let failure = flush(), let final = perform(closing.ioFailed(failure)) { return end(final) }
            if wireOffset == wire.count && framesHead == frames.count, let final = perform(closing.outputFlushed()) {
                return end(final)
            }

            // Wait.
            let reading = !readPaused || !closing.isOpen
            var timeout: Int32 = -1
            if let deadline = closing.deadlineMs {
                let now = Self.nowMs()
                if let final = perform(closing.tick(nowMs: now)) { return end(final) }
                timeout = Int32(clamping: deadline - now)
            }
            if reading && mayHaveInput { timeout = 0 }
            var events: Int16 = reading ? Int16(POLLIN) : 0
            if wireOffset < wire.count { events |= Int16(POLLOUT) }
            // A socket neither read nor written is left out (a negative fd is skipped): `poll`
            // reports POLLHUP and POLLERR unasked, and a paused reader would spin on them. A dead
            // socket is found by the next read or write.
            var fds = [pollfd(fd: events == 0 ? -1 : fd, events: events, revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, timeout) < 0 && errno != EINTR,
               let final = perform(closing.ioFailed("poll: " + String(cString: strerror(errno)))) {
                return end(final)
            }
            if fds[1].revents != 0 { ConnectionCore.drainWakePipe(wakeRead) }

            // Read.
            let socketEvents = fds[0].revents
            if reading && (mayHaveInput || socketEvents & Int16(POLLIN | POLLHUP | POLLERR) != 0) {
                if let final = readAvailable() { return end(final) }
            }
        }
    }

    /// Carries out the closing handshake's actions; returns the end when one of them is it.
    private func perform(_ actions: [ClosingHandshake.Action]) -> TransportError? {
        for action in actions {
            switch action {
            case .sendClose(let payload):
                queueControl(.close, payload)
            case .report(let end):
                core.publishEnd(end)
            case .shutWrite:
                if let tls {
                    tls.shutdown()
                    tls.drainOutput(into: &wire)
                    _ = flush()
                }
                shutdown(fd, Int32(SHUT_WR))
            case .end(let end):
                return end
            }
        }
        return nil
    }

    /// Reads until the socket has nothing more (or the reader has no room); returns how the
    /// connection ended if it did.
    private func readAvailable() -> TransportError? {
        mayHaveInput = false
        defer {
            // Stopped for want of room: under TLS decrypted bytes may wait unseen by `poll`.
            if readPaused && closing.isOpen { mayHaveInput = true }
        }
        while !readPaused || !closing.isOpen {
            switch readApp() {
            case .bytes(let n):
                if case .lingering = closing.phase { continue }  // draining: dropped
                decode((0, n))
            case .wouldBlock:
                return nil
            case .end:
                return perform(closing.inputEnded())
            case .failed(let why):
                return perform(closing.ioFailed(why))
            }
        }
        return nil
    }

    /// Decodes `appBuffer[range]`: messages to the reader, pings answered, a close or a failure
    /// moving the closing handshake on.
    private func decode(_ range: (Int, Int)) {
        var offset = range.0
        var stop = false
        appBuffer.withUnsafeMutableBytes { all in
            let buffer = UnsafeMutableRawBufferPointer(rebasing: all[0..<range.1])
            while !stop {
                switch messages.next(buffer, offset: &offset) {
                case .needMore:
                    stop = true
                case .message(let kind, let bytes):
                    guard closing.isOpen else { continue }
                    guard kind == .text else {
                        _ = perform(closing.violated(code: .unsupportedData, reason: "binary message", nowMs: Self.nowMs()))
                        stop = true
                        continue
                    }
                    if core.deliver(String(decoding: bytes, as: UTF8.self)) { readPaused = true }
                case .ping(let payload):
                    if closing.isOpen && unsentPongEnds.count < Self.maxUnsentPongs {
                        queueControl(.pong, payload)
                        unsentPongEnds.append(queued)
                        core.pingObserver?(payload)
                    }
                case .pong:
                    break
                case .close(let code, let reason):
                    _ = perform(closing.closeReceived(code: code, reason: reason, nowMs: Self.nowMs()))
                    stop = true
                case .failure(let error):
                    _ = perform(closing.violated(code: error.closeCode, reason: error.reason, nowMs: Self.nowMs()))
                    stop = true
                }
            }
        }
    }

    private func queueControl(_ opcode: Opcode, _ payload: [UInt8]) {
        let frame = FrameEncoder.frame(opcode: opcode, payload: payload, maskKey: SecureRandom.uint32())
        queued += frame.count
        frames.append(frame)
    }

    /// Moves frames to `wire` (encrypting under TLS) and writes until the kernel refuses more;
    /// answers the senders whose frames are written. Returns why writing failed, if it did.
    private func flush() -> String? {
        while true {
            if wireOffset == wire.count {
                wire.removeAll(keepingCapacity: wire.capacity <= 1 << 20)
                wireOffset = 0
                flushed = moved
                completeSends()
                guard framesHead < frames.count else { break }
                // Up to 256 KiB per batch: few syscalls, bounded copies.
                while framesHead < frames.count && (wire.count < 256 << 10) {
                    let frame = frames[framesHead]
                    frames[framesHead] = []
                    framesHead += 1
                    moved += frame.count
                    guard queueWire(frame) else { return TLSClientSession.reasons("TLS write failed") }
                }
                if framesHead == frames.count {
                    frames.removeAll(keepingCapacity: true)
                    framesHead = 0
                }
            }
            switch writeSocket() {
            case .progress: continue
            case .wouldBlock: return nil
            case .failed(let why): return why
            }
        }
        return nil
    }

    private func completeSends() {
        unsentPongEnds.removeAll { $0 <= flushed }
        var done = 0
        while done < pendingSends.count && pendingSends[done].end <= flushed { done += 1 }
        guard done > 0 else { return }
        for send in pendingSends[0..<done] { send.continuation.resume(returning: .success(())) }
        pendingSends.removeFirst(done)
    }

    /// Appends `bytes` to `wire`, through TLS when it is on.
    private func queueWire(_ bytes: [UInt8]) -> Bool {
        guard let tls else {
            wire.append(contentsOf: bytes)
            return true
        }
        guard bytes.withUnsafeBytes({ tls.write($0) }) else { return false }
        tls.drainOutput(into: &wire)
        return true
    }

    // MARK: the socket

    private enum ReadResult { case bytes(Int), wouldBlock, end, failed(String) }
    private enum WriteResult { case progress, wouldBlock, failed(String) }

    private func readSocket() -> ReadResult {
        while true {
            let n = socketBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { return .bytes(n) }
            if n == 0 { return .end }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
            return .failed("recv: " + String(cString: strerror(errno)))
        }
    }

    /// Bytes for the frame decoder into `appBuffer`: the socket's, or under TLS what OpenSSL
    /// decrypts from them (its own output, e.g. a key update's answer, is queued on `wire`).
    private func readApp() -> ReadResult {
        guard let tls else {
            let result = readSocket()
            if case .bytes(let n) = result {
                socketBuffer.withUnsafeBytes { source in
                    appBuffer.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<n])) }
                }
            }
            return result
        }
        while true {
            var count = 0
            let step = appBuffer.withUnsafeMutableBytes { tls.read(into: $0, count: &count) }
            tls.drainOutput(into: &wire)
            switch step {
            case .done:
                return .bytes(count)
            case .closed:
                return .end
            case .failed(let why):
                return .failed(why)
            case .wantRead:
                switch readSocket() {
                case .bytes(let n):
                    socketBuffer.withUnsafeBytes { tls.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                case let other:
                    return other
                }
            }
        }
    }

    private func writeSocket() -> WriteResult {
        guard wireOffset < wire.count else { return .progress }
        while true {
            let n = wire.withUnsafeBytes { all in
                send(fd, all.baseAddress! + wireOffset, all.count - wireOffset, Int32(MSG_NOSIGNAL))
            }
            if n >= 0 {
                wireOffset += n
                return .progress
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
            return .failed("send: " + String(cString: strerror(errno)))
        }
    }

    // MARK: the end

    /// Closes everything and answers everyone: the senders whose frames were not written, the
    /// reader (after the messages it has not taken), the `close` callers.
    private func end(_ final: TransportError) {
        closeSocket()
        tls = nil
        for send in pendingSends { send.continuation.resume(returning: .failure(final)) }
        pendingSends = []
        core.finish(final)
        // `finish` set `finished` under the lock: no one writes to the pipe any more.
        close(wakeRead)
        close(wakeWrite)
    }

    private func closeSocket() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
    }

    static func nowMs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }

    static func milliseconds(_ d: Duration) -> UInt64 {
        let (seconds, attoseconds) = d.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1000 + UInt64(attoseconds / 1_000_000_000_000_000)
    }

    /// "host:port" of a socket address, for error messages.
    static func describe(_ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t) -> String {
        guard let address else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        guard getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0 else { return "?" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let p = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return h.contains(":") ? "[\(h)]:\(p)" : "\(h):\(p)"
    }
}
#endif
