import Glibc
import VigilBytes
import VigilLoop
import VigilWire

/// One client socket, from its first byte to its close.
///
/// It decides nothing about its own life: every event goes to its `ConnectionLifecycle` value,
/// and the connection executes the actions that come back (queue a frame, arm the deadline, end
/// the application's session, shut the write side, drop). Its I/O is its `ByteStream` base
/// class's; the server only creates it, finds it by fd, and fires its deadline.
///
/// Memory: an idle open connection is this one object: reads go through the loop's shared buffer,
/// output chunks come from the pool and go back when flushed, the HTTP parser is dropped after
/// the handshake, the WebSocket message assembler exists only while a message (or a frame
/// header) spans reads (`Side`), and the application keeps its per-connection state in its own
/// table.
public final class Connection: ByteStream {
    /// The server outlives every connection it holds (it closes them all before it goes), so the
    /// reference is not counted: `unowned(unsafe)` spares an atomic retain/release on every send,
    /// which the fan-out profile showed as the top user-space cost with plain `unowned` (12%).
    /// Held as `Unmanaged` (not `unowned(unsafe)`, which still retained what was read through it:
    /// the send policies' array, once per fan-out recipient); `send(shared:)` borrows it at +0.
    private let serverRef: Unmanaged<Server>
    private var server: Server { serverRef.takeUnretainedValue() }
    public private(set) var lifecycle: ConnectionLifecycle
    // The small fields right after the lifecycle, in the bytes its size (10) leaves before the
    // next 8-byte field (this object is what an idle connection is: 330 bytes once, 336 with
    // malloc's header and rounding; now 168, 176: docs/BENCHMARKS.md, "What an idle connection
    // is made of").
    /// The deflater setting agreed in the handshake (`Compression` slot; 0: no compression).
    public private(set) var compressionSlot: UInt8 = 0
    /// Why the connection will end if the actions being performed drop it (set by each event's
    /// handler before it performs the lifecycle's actions; read by `.drop`).
    private var endCause = ConnectionEnd.peerGone
    /// The last close code sent or received (0: none), for the close's debug log line.
    private var closeCode: UInt16 = 0
    /// The socket's peer is a trusted proxy: the request head's `X-Forwarded-For` names the client.
    private var viaTrustedProxy: Bool
    /// A connection to the admin listener (the operator's endpoints, no WebSocket).
    public let isAdmin: Bool
    /// The HTTP phase's parser, or the WebSocket phase's message assembler while it holds
    /// something: one pointer, nothing at all for an idle open connection.
    private var side: Side
    /// The application behind the endpoint, from the upgrade until `endApplication`.
    private var app: (any WebSocketApplication)?
    /// The client's address as a keyed hash (`PeerAddress.key`), for budgets that a reconnect does
    /// not reset. The address itself is not kept.
    public private(set) var addressKey: UInt64

    private init(fd: Int32, server: Server, lifecycle: ConnectionLifecycle, addressKey: UInt64, viaTrustedProxy: Bool, admin: Bool) {
        self.serverRef = Unmanaged.passUnretained(server)
        self.isAdmin = admin
        self.lifecycle = lifecycle
        self.addressKey = addressKey
        self.viaTrustedProxy = viaTrustedProxy
        self.side = .http(HTTPState(maxHeadBytes: server.config.maxRequestHeadBytes))
        super.init(fd: fd, loop: server.loop)
    }

    /// A connection for a socket just accepted, and the actions that start its life (its
    /// handshake deadline); the server performs them once the connection is registered.
    static func accepted(fd: Int32, server: Server, nowMs: Int64, addressKey: UInt64, viaTrustedProxy: Bool, admin: Bool = false)
        -> (Connection, ConnectionLifecycle.Actions) {
        let (lifecycle, actions) = ConnectionLifecycle.accepted(nowMs: nowMs, server.timeouts)
        return (Connection(fd: fd, server: server, lifecycle: lifecycle, addressKey: addressKey, viaTrustedProxy: viaTrustedProxy,
                           admin: admin), actions)
    }

    /// Runs the handshake's digest once on RFC 6455's own example (§1.3) and says whether it
    /// gave the RFC's answer. libcrypto sets itself up on first use (OpenSSL 3's default provider,
    /// its algorithm tables and error strings; with the code pages that brings in, 2.2 MB of RSS,
    /// once); vigild calls this at startup, so that happens there and a broken libcrypto stops it,
    /// rather than in the first client's handshake.
    public static func checkHandshakeDigest() -> Bool {
        Handshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    }

    // MARK: what the application may do

    /// Sends one message as a single frame (compressed when this connection agreed to
    /// permessage-deflate and it is worth it), if the connection is open and its policy admits it.
    @discardableResult
    public func send(_ opcode: Opcode, payload: UnsafeRawBufferPointer, traffic: TrafficClass = .reply) -> SendResult {
        guard lifecycle.isOpen else { return .dropped }
        if compressionSlot != 0, let compressed = server.compression.compress(payload, slot: compressionSlot) {
            return queueFrame(opcode, compressed, traffic, compressed: true)
        }
        return queueFrame(opcode, payload, traffic)
    }

    /// Sends one text message made of `prefix`, the bytes of `shared` and `suffix`: the middle
    /// part, the same for many connections (a stream's `state` in the replies of a contact group
    /// watching again), is queued by reference on an uncompressed connection, so a hundred such
    /// replies hold it once; a compressing connection compresses the whole message as `send` does.
    @discardableResult
    public func send(prefix: UnsafeRawBufferPointer, shared: ByteChunk, suffix: UnsafeRawBufferPointer,
                     traffic: TrafficClass = .reply) -> SendResult {
        guard lifecycle.isOpen else { return .dropped }
        let middle = shared.bytes
        if compressionSlot != 0 {
            var whole = [UInt8]()
            whole.reserveCapacity(prefix.count + middle.count + suffix.count)
            whole.append(contentsOf: prefix)
            whole.append(contentsOf: middle)
            whole.append(contentsOf: suffix)
            return whole.withUnsafeBytes { send(.text, payload: $0, traffic: traffic) }
        }
        return queueFrame(.text, prefix, traffic, then: (shared, suffix))
    }

    /// Queues a frame encoded once for many connections (`SharedFrame`), by reference. `tag`
    /// names what the frame supersedes (a panic stream's locations) for a conflating policy.
    @discardableResult
    public func send(shared frame: ChunkSlice, traffic: TrafficClass, tag: UInt64 = 0) -> SendResult {
        guard lifecycle.isOpen else { return .dropped }
        let size = frame.count
        var conflated = false
        if tag != 0, let above = server.policies[traffic].conflateAbove, queuedBytes + size > above {
            conflated = removeUnsent(tag: tag) > 0
        }
        guard queuedBytes + size <= budgetNow(traffic) else {
            return overflow(traffic)
        }
        append(shared: frame.chunk, from: frame.start, to: frame.end, tag: tag)
        if conflated { server.counters.conflations += 1 }
        return conflated ? .conflated : .queued
    }

    /// `send(shared:traffic:)` for an untagged frame (so never `.conflated`) with the budget
    /// decided once for the whole fan-out (`SendPolicies.fanOutBudget`): a send within its
    /// `least` is queued without asking the policies.
    @inline(__always)
    public func send(shared frame: ChunkSlice, traffic: TrafficClass, budget: FanOutBudget) -> SendResult {
        guard lifecycle.isOpen else { return .dropped }
        let after = queuedBytes + frame.count
        guard after <= budget.least
            || !budget.exact && after <= budgetNow(traffic)
        else { return overflow(traffic) }
        append(shared: frame.chunk, from: frame.start, to: frame.end)
        return .queued
    }

    /// The budget this connection's `traffic` has now, given every connection's unsent bytes.
    @inline(__always)
    private func budgetNow(_ traffic: TrafficClass) -> Int {
        serverRef._withUnsafeGuaranteedRef { $0.policies.budget(traffic, totalQueued: $0.loop.queuedBytes) }
    }

    /// The most a send can add to the loop's queued bytes beyond the frame: a close frame instead
    /// of it, when the connection's policy closes it (2 + 125 bytes, RFC 6455 §5.5).
    public static let maxCloseFrameBytes = 127

    /// Starts the closing handshake from our side (a policy, or shutdown).
    public func close(code: CloseCode, reason: String = "") {
        perform(lifecycle.closeRequested(code, reason: reason, nowMs: monotonicMilliseconds(), server.timeouts))
    }

    /// Drops the connection now, without a closing handshake (the shutdown grace ran out).
    func abort() {
        endCause = .shutdown
        perform(lifecycle.gone())
    }

    /// The deadline the lifecycle armed last has passed.
    func timerFired(nowMs: Int64) {
        switch lifecycle.phase {
        case .http: endCause = .handshakeTimeout
        case .open: endCause = .pingTimeout
        case .closeSent, .draining, .closed:
            // A slow consumer closed by its policy rarely answers the close: it stays counted as one.
            if endCause != .slowConsumer { endCause = .closeTimeout }
        }
        perform(lifecycle.timerFired(nowMs: nowMs, server.timeouts, canRespond: isTransportReady))
    }

    // MARK: what the stream reports

    public override func received(_ bytes: UnsafeMutableRawBufferPointer) {
        lifecycle.input(nowMs: monotonicMilliseconds())
        switch lifecycle.phase {
        case .http: consumeRequest(bytes)
        case .open, .closeSent: consumeFrames(bytes)
        case .draining, .closed: break  // discarded: only EOF is awaited
        }
    }

    /// The peer sent FIN. With nothing more to read, a WebSocket without a close frame has ended
    /// abnormally (1006, which is never sent on the wire), so the socket simply goes.
    public override func peerClosed() {
        // EOF after our side is done (a close handshake, an HTTP response) is the normal end.
        if endCause == .slowConsumer {
            // Closed by its policy; whatever it does next, that is why it ended.
        } else if lifecycle.phase == .draining {
            endCause = closeCode != 0 ? .closed : .httpDone
        } else {
            endCause = .peerGone
        }
        perform(lifecycle.gone())
    }

    /// Asked for with `notifyWhenDrained()` (a replay paced by the peer's reading).
    public override func drained() {
        app?.drained(self)
    }

    /// An `http://` request on the TLS port: a plain 400 that says so, then close.
    public override func plaintextOnTLSPort() {
        respond(HTTPResponse(status: .badRequest, body: Array("this port speaks TLS: use wss:// (or https://)\n".utf8),
                             contentType: "text/plain; charset=utf-8"))
    }

    public override func failed(_ error: SystemError) {
        server.connectionFailed(error)
        if endCause != .slowConsumer { endCause = .ioError }
        perform(lifecycle.gone())
    }

    // MARK: HTTP phase

    private func consumeRequest(_ bytes: UnsafeMutableRawBufferPointer) {
        guard case .http(let http) = side else { return }
        switch http.parser.feed(UnsafeRawBufferPointer(bytes)) {
        case .needMore:
            return
        case .failure(let status, let message):
            respond(HTTPResponse(status: status, body: Array((message + "\n").utf8), contentType: "text/plain; charset=utf-8"))
        case .complete(let head, let leftover):
            side = .none
            if viaTrustedProxy {
                viaTrustedProxy = false
                if let client = ForwardedFor.client(headers: head.values("x-forwarded-for"), trusted: server.trustedProxies) {
                    addressKey = client.key
                }
            }
            if isAdmin {
                respond(server.adminRoute(head))
                return
            }
            switch server.route(head) {
            case .respond(let response):
                respond(response)
            case .respondShared(let response, let body):
                respond(response, body: body)
            case .upgrade(let upgrade, let application):
                let agreement: PerMessageDeflate.Agreement?
                do {
                    agreement = try PerMessageDeflate.negotiate(upgrade.extensions, settings: server.compression.settings)
                } catch {
                    respond(error.handshakeError.response())
                    return
                }
                let response = Handshake.response(accept: Handshake.acceptValue(forKey: upgrade.key), subprotocol: upgrade.subprotocol,
                                                  extensions: agreement?.responseHeader)
                response.withUnsafeBytes { append($0) }
                if let agreement {
                    compressionSlot = server.compression.slot(for: agreement.parameters)
                    // Never at rest (it holds the inflater), so it stays for the whole WebSocket phase.
                    side = .frames(ParkedMessage(MessageAssembler(role: .server, maxMessageBytes: server.config.maxMessageBytes,
                                                                  inflation: agreement.parameters, pool: server.compression.inflaters)))
                }
                perform(lifecycle.upgraded(nowMs: monotonicMilliseconds(), server.timeouts))
                app = application
                server.webSocketOpened()
                application.opened(self)
                if leftover > 0, lifecycle.readsFrames {
                    consumeFrames(UnsafeMutableRawBufferPointer(rebasing: bytes[(bytes.count - leftover)...]))
                }
            }
        }
    }

    /// Sends a complete HTTP response (and a body shared with other connections, after its head);
    /// the connection ends after it.
    private func respond(_ response: HTTPResponse, body: ByteChunk? = nil) {
        if !isAdmin { server.counters.httpResponses[response.status.code, default: 0] += 1 }
        side = .none
        response.serialize().withUnsafeBytes { append($0) }
        if let body { append(shared: body) }
        perform(lifecycle.responded(nowMs: monotonicMilliseconds(), server.timeouts, withBody: body != nil))
    }

    // MARK: WebSocket phase

    /// Reads frames with the assembler parked from an earlier read, or a new one (what an
    /// assembler at rest is equivalent to), and parks it again only if it holds something.
    private func consumeFrames(_ bytes: UnsafeMutableRawBufferPointer) {
        let parked: ParkedMessage?
        var messages: MessageAssembler
        if case .frames(let p) = side {
            parked = p
            messages = p.assembler
        } else {
            parked = nil
            messages = MessageAssembler(reader: MessageReader(role: .server, maxMessageBytes: server.config.maxMessageBytes))
        }
        consumeFrames(bytes, &messages)
        if !lifecycle.readsFrames {
            messages.reset()  // the application has ended (`.endApplication` dropped the parked one)
        } else if messages.isAtRest {
            if parked != nil { side = .none }
        } else if let parked {
            parked.assembler = messages
        } else {
            side = .frames(ParkedMessage(messages))
        }
    }

    private func consumeFrames(_ bytes: UnsafeMutableRawBufferPointer, _ messages: inout MessageAssembler) {
        var offset = 0
        while lifecycle.readsFrames {
            switch messages.next(bytes, offset: &offset) {
            case .needMore:
                return
            case .message(let kind, let payload):
                server.counters.messagesIn += 1
                if lifecycle.isOpen, let app { app.received(self, kind: kind, payload: payload) }
            case .ping(let payload):
                perform(lifecycle.pingReceived(payload))
            case .pong:
                break  // any input already counts as liveness
            case .close(let code, _):
                server.counters.closesReceived[code ?? 1005, default: 0] += 1
                if closeCode == 0 { closeCode = code ?? 1005 }
                perform(lifecycle.closeReceived(code: code, nowMs: monotonicMilliseconds(), server.timeouts))
            case .failure(let error):
                perform(lifecycle.protocolViolation(error, nowMs: monotonicMilliseconds(), server.timeouts))
            }
        }
    }

    // MARK: executing the lifecycle's actions

    func perform(_ actions: ConnectionLifecycle.Actions) {
        for action in actions {
            if isClosed { return }  // dropped by an earlier action (a control frame over the cap)
            switch action {
            case .armTimer(let at):
                server.setDeadline(fd, atMs: at)
            case .respondTimeout:
                HTTPResponse(status: .requestTimeout, body: Array("request head not received in time\n".utf8),
                             contentType: "text/plain; charset=utf-8").serialize().withUnsafeBytes { append($0) }
            case .sendPing:
                queueFrame(.ping, UnsafeRawBufferPointer(start: nil, count: 0), .control)
            case .sendPong(let payload):
                payload.withUnsafeBytes { _ = queueFrame(.pong, $0, .control) }
            case .sendClose(let code, let reason):
                server.counters.closesSent[code?.rawValue ?? 1005, default: 0] += 1
                if closeCode == 0 { closeCode = code?.rawValue ?? 1005 }
                let payload = code.map { FrameEncoder.closePayload(code: $0, reason: reason) } ?? []
                payload.withUnsafeBytes { _ = queueFrame(.close, $0, .control) }
            case .endApplication:
                if case .frames(let parked) = side {
                    side = .none
                    parked.assembler.reset()
                }
                if let app {
                    self.app = nil
                    server.webSocketEnded()
                    app.closed(self)
                }
            case .shutWrite:
                shutdownWriteAfterQueued()
            case .drop:
                if !isAdmin { server.connectionEnded(endCause, closeCode: closeCode) }
                server.remove(self)
                close()
            }
        }
    }

    /// Encodes one frame straight into the output queue, if the traffic class's policy admits it:
    /// the header and `payload` copied in, then (`then`) a shared chunk by reference and more
    /// bytes copied, all one payload.
    @discardableResult
    private func queueFrame(_ opcode: Opcode, _ payload: UnsafeRawBufferPointer, _ traffic: TrafficClass, compressed: Bool = false,
                            then rest: (shared: ByteChunk, suffix: UnsafeRawBufferPointer)? = nil) -> SendResult {
        let count = payload.count + (rest.map { $0.shared.bytes.count + $0.suffix.count } ?? 0)
        let header = FrameEncoder.headerSize(payloadCount: count, masked: false)
        guard queuedBytes + header + count <= server.policies.budget(traffic, totalQueued: server.loop.queuedBytes) else {
            return overflow(traffic)
        }
        let p = reserve(header + payload.count)
        let written = FrameEncoder.writeHeader(into: p, opcode: opcode, fin: true, rsv1: compressed, payloadCount: count, maskKey: nil)
        if let src = payload.baseAddress, payload.count > 0 {
            (p + written).copyMemory(from: src, byteCount: payload.count)
        }
        commit(header + payload.count)
        if let rest {
            append(shared: rest.shared)
            if rest.suffix.count > 0 { append(rest.suffix) }
        }
        if opcode == .text || opcode == .binary { server.counters.framesOut += 1 }
        return .queued
    }

    /// A consumer this far behind is not coming back; keeping its backlog hurts everyone else.
    /// Its policy says how it goes: the backlog dropped and a close frame with the reason sent
    /// next (it may still read that), or at once. Nothing is called back into the application
    /// here but `closed` (which only records), so a fan-out may trigger this safely.
    private func overflow(_ traffic: TrafficClass) -> SendResult {
        server.slowConsumer(traffic)
        endCause = .slowConsumer
        switch server.policies[traffic].overflow {
        case .close(let code, let reason) where lifecycle.isOpen:
            _ = discardUnsent()
            perform(lifecycle.closeRequested(code, reason: reason, nowMs: monotonicMilliseconds(), server.timeouts))
        case .close, .disconnect:
            perform(lifecycle.gone())
        }
        return .closing
    }
}

/// What a connection holds beside its socket, by phase: one pointer (a two-class enum is stored
/// as one reference), where a parser and an assembler inline cost 112 bytes in every connection.
private enum Side {
    /// Nothing: an upgraded connection between messages, or one that is done reading.
    case none
    /// The HTTP phase: the request head's parser.
    case http(HTTPState)
    /// The WebSocket phase while a message or a frame header spans reads, or for the whole phase
    /// with permessage-deflate (the assembler holds the inflater).
    case frames(ParkedMessage)
}

/// A message assembler kept between reads because it holds something (`MessageAssembler.isAtRest`
/// is false): part of a message or of a frame header, a failure, or compression's state.
private final class ParkedMessage {
    var assembler: MessageAssembler
    init(_ assembler: MessageAssembler) { self.assembler = assembler }
}

/// The HTTP phase's state, boxed so that an upgraded connection drops it whole.
final class HTTPState {
    var parser: HTTPRequestParser
    init(maxHeadBytes: Int) {
        parser = HTTPRequestParser(maxHeadBytes: maxHeadBytes)
    }
}
