import CLinux
import Glibc
import VigilCore
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

/// A WebSocket client connection (RFC 6455 client side) on the project's own loop and codec.
///
/// It is a `ByteStream` and assembles messages with a `MessageAssembler`, like vigild's
/// connections: this file holds only what a client does differently (the connect and handshake,
/// masking every frame it sends with a fresh key, §5.3, and its side of the close).
final class ClientConnection: ByteStream {
    enum Phase { case connecting, handshaking, open, closing, closed }

    /// The scenario's index for this connection (its role and slot).
    let tag: Int
    /// The node it is connected to (an index into the pool's `urls`).
    let node: Int
    private(set) var phase = Phase.connecting
    /// Whether the handshake ever completed (a failure before it is a connect failure).
    private(set) var everOpen = false
    /// The pool outlives its connections (it closes them all before the run ends).
    private unowned let pool: ClientPool
    weak var delegate: (any ClientDelegate)?
    private let key: String
    private var response = HTTPResponseParser()
    private var messages: MessageAssembler
    /// Monotonic ns when the connect started (handshake timeout, connect latency).
    let startedNs: UInt64
    private var rng: SplitMix64
    /// The code of the server's close frame, once one arrived (0: it had none).
    private(set) var serverCloseCode: UInt16?
    /// Bytes read from the socket (a stalled reader's backlog is counted when it resumes).
    private(set) var bytesReceived = 0

    init(fd: Int32, tag: Int, pool: ClientPool, delegate: any ClientDelegate, seed: UInt64, node: Int = 0) {
        self.tag = tag
        self.node = node
        self.pool = pool
        self.delegate = delegate
        self.startedNs = Clock.nowNs()
        self.rng = SplitMix64(state: seed)
        var keyBytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<16 { keyBytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
        key = Crypto.base64Encode(keyBytes)
        var reader = MessageReader(role: .client, maxMessageBytes: 16 << 20)
        reader.validatesText = pool.validateText
        messages = MessageAssembler(reader: reader)
        super.init(fd: fd, loop: pool.loop)
    }

    var isOpen: Bool { phase == .open }

    // MARK: sending

    /// Queues the writer's text as one masked text frame.
    func sendText(_ writer: JSONWriter) {
        guard phase == .open else { return }
        writer.withUnsafeBytes { queueFrame(.text, $0) }
    }

    private func queueFrame(_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) {
        let maskKey = UInt32(truncatingIfNeeded: rng.next()) | 1
        let total = FrameEncoder.headerSize(payloadCount: payload.count, masked: true) + payload.count
        let p = reserve(total)
        let written = FrameEncoder.writeHeader(into: p, opcode: opcode, fin: true, rsv1: false,
                                               payloadCount: payload.count, maskKey: maskKey)
        if let base = payload.baseAddress, payload.count > 0 {
            (p + written).copyMemory(from: base, byteCount: payload.count)
            FrameEncoder.applyMask(UnsafeMutableRawBufferPointer(start: p + written, count: payload.count), key: maskKey, phase: 0)
        }
        commit(total)
    }

    /// Starts the closing handshake (code 1000); the connection finishes when the server answers.
    func closeHandshake() {
        switch phase {
        case .open:
            phase = .closing
            FrameEncoder.closePayload(code: .normal, reason: "").withUnsafeBytes { queueFrame(.close, $0) }
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

    // MARK: what the stream reports

    override func connected() {
        phase = .handshaking
        Handshake.clientRequest(host: pool.hostHeader(node), path: pool.path(node), key: key, subprotocols: [],
                                extensions: pool.offerDeflate ? PerMessageDeflate.name : nil).withUnsafeBytes { append($0) }
    }

    override func received(_ bytes: UnsafeMutableRawBufferPointer) {
        bytesReceived += bytes.count
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
                if pool.offerDeflate, let inflation = PerMessageDeflate.clientInflation(fromResponse: head.values("sec-websocket-extensions")) {
                    // The server compresses what it sends; this client sends uncompressed.
                    messages = MessageAssembler(role: .client, maxMessageBytes: 16 << 20, inflation: inflation, pool: pool.inflaters)
                    messages.reader.validatesText = pool.validateText
                }
                phase = .open
                everOpen = true
                pool.connectionOpened(node: node)
                offset = bytes.count - leftover
                delegate?.opened(self)
            }
        }
        while phase == .open || phase == .closing {
            switch messages.next(bytes, offset: &offset) {
            case .needMore:
                return
            case .message(let kind, let payload):
                if phase == .open && kind == .text { delegate?.message(self, payload) }
            case .ping(let payload):
                if phase == .open { payload.withUnsafeBytes { queueFrame(.pong, $0) } }
            case .pong:
                break
            case .close(let code, let reason):
                serverCloseCode = serverCloseCode ?? code ?? 0
                if phase == .open {
                    // The server closes first: answer (best effort, §5.5.1) and report why.
                    FrameEncoder.closePayload(code: .normal, reason: "").withUnsafeBytes { queueFrame(.close, $0) }
                    return finish(failure: "server closed: \(code.map(String.init) ?? "no code") \(reason)", flushFirst: true)
                }
                return finish(failure: nil)
            case .failure(let error):
                return finish(failure: "protocol: \(error.reason)")
            }
        }
    }

    override func peerClosed() {
        finish(failure: phase == .closing ? nil : "server closed the TCP connection")
    }

    override func failed(_ error: SystemError) {
        finish(failure: "\(error.call): \(String(cString: strerror(error.errno)))")
    }

    private func finish(failure: String?, flushFirst: Bool = false) {
        guard phase != .closed else { return }
        let wasOpen = phase == .open || phase == .closing
        phase = .closed
        if flushFirst { closeAfterWritingQueued() } else { close() }
        pool.connectionClosed(self, wasOpen: wasOpen)
        delegate?.closed(self, failure: failure)
    }
}
