import Glibc
import VigilLoop
import VigilWire

/// One client socket, from its first byte to its close.
///
/// Phases: `http` (reading the request head) → `open` (WebSocket) → `closeSent` (we sent a close
/// and wait for the peer's) → `draining` (nothing more to send: once the output is flushed the
/// write side is shut and input is discarded until EOF or the close timeout; closing with unread
/// input would make the kernel send RST and could destroy our last frame).
///
/// Memory: an idle open connection owns this object only: reads go through the loop's shared
/// buffer, output chunks come from the pool and go back when flushed, the HTTP parser is dropped
/// after the handshake and the message buffer exists only while a message spans reads.
public final class Connection: EventHandler {
    enum Phase: UInt8 { case http, open, closeSent, draining, closed }

    /// The server outlives every connection it holds (it closes them all before it goes), so the
    /// reference is not counted: `unowned(unsafe)` spares an atomic retain/release on every send,
    /// which the fan-out profile showed as the top user-space cost with plain `unowned`.
    unowned(unsafe) let server: Server
    /// `websocket.max_output_buffer_bytes`, read on every send.
    private let maxOutputBufferBytes: Int
    public let fd: Int32
    var phase: Phase = .http
    var http: HTTPState?
    var reader: MessageReader
    var app: WebSocketApplication?
    var output = OutputQueue()
    /// Message assembly: the first chunk stays a pointer into the read buffer (zero copy for a
    /// message that arrives whole); bytes are copied into `message` only when it spans reads.
    var pendingChunk: UnsafeRawBufferPointer?
    var message: [UInt8] = []
    var messageKind: MessageKind = .text
    var messageOpen = false
    var lastActivityMs: Int64
    var pingSentAtMs: Int64 = 0
    var interest: IOEvents = [.readable, .readHangup]
    var queuedForFlush = false
    var writeShut = false

    /// The subprotocol agreed in the handshake, if any.
    public internal(set) var subprotocol: String?

    init(fd: Int32, server: Server, now: Int64) {
        self.fd = fd
        self.server = server
        self.lastActivityMs = now
        self.http = HTTPState(maxHeadBytes: server.config.maxRequestHeadBytes)
        self.reader = MessageReader(role: .server, maxMessageBytes: server.config.maxMessageBytes)
        self.maxOutputBufferBytes = server.config.maxOutputBufferBytes
    }

    /// The application may keep state per connection here (issue-level code owns its meaning).
    public var userData: AnyObject?

    // MARK: events

    public func handleEvents(_ events: IOEvents) {
        if events.contains(.writable) {
            server.flush(self)
            if phase == .closed { return }
        }
        if events.contains(.readable) || events.contains(.readHangup) || events.contains(.hangup) || events.contains(.error) {
            readOnce()
        }
    }

    private func readOnce() {
        let buffer = server.loop.readBuffer
        let n = read(fd, buffer.baseAddress, buffer.count)
        if n > 0 {
            lastActivityMs = monotonicMilliseconds()
            pingSentAtMs = 0
            consume(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
        } else if n == 0 {
            peerClosed()
        } else if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
            server.abort(self)
        }
    }

    private func consume(_ bytes: UnsafeMutableRawBufferPointer) {
        switch phase {
        case .http: consumeRequest(bytes)
        case .open, .closeSent: consumeFrames(bytes)
        case .draining, .closed: break  // discarded: we are only waiting for EOF
        }
    }

    /// The peer sent FIN (or reset). With nothing more to read, a WebSocket without a close frame
    /// has ended abnormally (1006, which is never sent on the wire), so the socket simply goes.
    private func peerClosed() {
        server.abort(self)
    }

    // MARK: HTTP phase

    private func consumeRequest(_ bytes: UnsafeMutableRawBufferPointer) {
        guard let http else { return }
        switch http.parser.feed(UnsafeRawBufferPointer(bytes)) {
        case .needMore:
            return
        case .failure(let status, let message):
            respond(HTTPResponse(status: status, body: Array((message + "\n").utf8), contentType: "text/plain; charset=utf-8"))
        case .complete(let head, let leftover):
            self.http = nil
            switch server.route(head) {
            case .respond(let response):
                respond(response)
            case .upgrade(let upgrade, let application):
                let accept = Handshake.acceptValue(forKey: upgrade.key)
                let response = Handshake.response(accept: accept, subprotocol: upgrade.subprotocol)
                response.withUnsafeBytes { output.append($0, pool: server.pool) }
                server.scheduleFlush(self)
                subprotocol = upgrade.subprotocol
                phase = .open
                app = application
                server.upgraded(self)
                application.opened(self)
                if leftover > 0, phase == .open {
                    consumeFrames(UnsafeMutableRawBufferPointer(rebasing: bytes[(bytes.count - leftover)...]))
                }
            }
        }
    }

    /// Sends a complete HTTP response and ends the connection after it.
    func respond(_ response: HTTPResponse) {
        http = nil
        response.serialize().withUnsafeBytes { output.append($0, pool: server.pool) }
        enterDraining()
    }

    // MARK: WebSocket phase

    private func consumeFrames(_ bytes: UnsafeMutableRawBufferPointer) {
        var offset = 0
        while phase == .open || phase == .closeSent {
            switch reader.next(bytes, offset: &offset) {
            case .needMore:
                // The read buffer is reused by the next connection: keep the partial message.
                if let chunk = pendingChunk {
                    message.append(contentsOf: chunk)
                    pendingChunk = nil
                }
                server.applyBackpressure(self)
                return
            case .messageStart(let kind, _):
                messageKind = kind
                messageOpen = true
            case .messageData(let chunk):
                if pendingChunk == nil && message.isEmpty {
                    pendingChunk = chunk
                } else {
                    if let first = pendingChunk {
                        message.append(contentsOf: first)
                        pendingChunk = nil
                    }
                    message.append(contentsOf: chunk)
                }
            case .messageEnd:
                messageOpen = false
                let kind = messageKind
                if phase == .open, let app {
                    if let chunk = pendingChunk {
                        app.received(self, kind: kind, payload: chunk)
                    } else {
                        message.withUnsafeBytes { app.received(self, kind: kind, payload: $0) }
                    }
                }
                pendingChunk = nil
                // Only messages that spanned reads were copied; an idle connection keeps no storage.
                if message.capacity > 0 { message = [] }
            case .ping(let payload):
                if phase == .open {
                    payload.withUnsafeBytes { sendFrame(.pong, payload: $0) }
                }
            case .pong:
                break  // any input already counts as liveness
            case .close(let code, _):
                if phase == .open {
                    // Echo the peer's code (RFC 6455 §5.5.1); a close without a code gets an empty close.
                    let payload = code.map { FrameEncoder.closePayload(code: CloseCode(rawValue: $0), reason: "") } ?? []
                    payload.withUnsafeBytes { sendFrame(.close, payload: $0) }
                }
                enterDraining()
                return
            case .failure(let error):
                if phase == .open {
                    let payload = FrameEncoder.closePayload(code: error.closeCode, reason: error.reason)
                    payload.withUnsafeBytes { sendFrame(.close, payload: $0) }
                }
                enterDraining()
                return
            }
        }
    }

    /// Starts the closing handshake from our side: send close, wait for the peer's (or the timeout).
    public func close(code: CloseCode, reason: String = "") {
        guard phase == .open else { return }
        let payload = FrameEncoder.closePayload(code: code, reason: reason)
        payload.withUnsafeBytes { sendFrame(.close, payload: $0) }
        phase = .closeSent
        server.scheduleCloseTimeout(self)
    }

    /// Sends one message as a single frame. Ignored unless the connection is open.
    public func send(_ opcode: Opcode, payload: UnsafeRawBufferPointer) {
        guard phase == .open else { return }
        sendFrame(opcode, payload: payload)
    }

    /// Queues a frame encoded once for many connections (see `SharedFrame`). Ignored unless open.
    public func send(shared frame: ByteChunk) {
        guard phase == .open else { return }
        if output.byteCount > 0 && output.byteCount + frame.count > maxOutputBufferBytes {
            server.slowConsumer(self)
            return
        }
        output.append(shared: frame)
        server.scheduleFlush(self)
    }

    /// Queues one frame; the bytes go out at the end of this loop turn.
    func sendFrame(_ opcode: Opcode, payload: UnsafeRawBufferPointer) {
        let headerSize = FrameEncoder.headerSize(payloadCount: payload.count, masked: false)
        let total = headerSize + payload.count
        if output.byteCount > 0 && output.byteCount + total > maxOutputBufferBytes {
            // A consumer this far behind is not coming back; keeping its backlog hurts everyone else.
            server.slowConsumer(self)
            return
        }
        let p = output.reserve(total, pool: server.pool)
        let written = FrameEncoder.writeHeader(into: p, opcode: opcode, fin: true, rsv1: false, payloadCount: payload.count, maskKey: nil)
        if let src = payload.baseAddress, payload.count > 0 {
            (p + written).copyMemory(from: src, byteCount: payload.count)
        }
        output.commit(total)
        server.scheduleFlush(self)
    }

    /// Nothing more will be sent: flush, shut the write side, discard input until EOF.
    func enterDraining() {
        if phase == .open || phase == .closeSent, messageOpen || pendingChunk != nil {
            pendingChunk = nil
            message = []
        }
        let wasWebSocket = phase == .open || phase == .closeSent
        phase = .draining
        if wasWebSocket { server.releasedApplication(self) }
        server.scheduleCloseTimeout(self)
        server.scheduleFlush(self)
    }

    /// Called by the server once the output queue is empty.
    func outputDrained() {
        if phase == .draining && !writeShut {
            writeShut = true
            shutdown(fd, Int32(SHUT_WR))
        }
    }
}

/// The HTTP phase's state, boxed so that an upgraded connection drops it whole.
final class HTTPState {
    var parser: HTTPRequestParser
    init(maxHeadBytes: Int) {
        parser = HTTPRequestParser(maxHeadBytes: maxHeadBytes)
    }
}
