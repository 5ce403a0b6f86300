import Glibc
import VigilCore
import VigilGeo
import VigilLoop
import VigilState
import VigilWire

/// `/v1`: the live map (`MapHub`) and panic-location streams (`PanicHub`) behind one endpoint.
///
/// It owns the hubs and the per-connection sessions, decodes each message, applies it, answers,
/// and fans the resulting events out: each event is encoded once into one frame, and that same
/// chunk is queued on every recipient's connection. Subscribers and watchers are identified by
/// their connection's fd, which is unique among open connections; the hubs forget a connection
/// when it closes, before the fd can be reused.
public final class V1Application: WebSocketApplication {
    /// What one connection's anonymous session holds.
    final class Session {
        let serial: UInt64
        let id: String
        var writes: TokenBucket
        var messages: TokenBucket
        init(serial: UInt64, id: String, writes: TokenBucket, messages: TokenBucket) {
            self.serial = serial
            self.id = id
            self.writes = writes
            self.messages = messages
        }
    }

    public internal(set) var hub: MapHub
    public internal(set) var panic: PanicHub
    private let decoder: RequestDecoder
    let secrets: Secrets
    private let limits: ServerMessages.Limits
    unowned let server: Server
    private var nextSerial: UInt64 = 1
    var writer = JSONWriter(capacity: 4096)
    var deliveries: [PinDelivery] = []
    var panicDeliveries: [PanicDelivery] = []
    /// Snapshots and journal (nil: state in memory only).
    var persistence: Persistence?

    public init(server: Server, settings: PinSettings, panic: PanicSettings, secrets: Secrets) {
        self.server = server
        self.hub = MapHub(settings: settings)
        self.panic = PanicHub(settings: panic)
        self.decoder = RequestDecoder(settings: settings, panic: panic)
        self.secrets = secrets
        self.limits = ServerMessages.Limits(maxMessageBytes: server.config.maxMessageBytes,
                                            messagesPerSecond: server.config.messagesPerSecond,
                                            messageBurst: server.config.messageBurst)
        server.addTickHook { [unowned self] in self.tick() }
    }

    /// Takes over the state recovered from disk and journals every acknowledged write from now on.
    func attach(_ p: Persistence) {
        hub = p.recovered.map
        panic = p.recovered.panic
        // Votes are kept per session serial: new sessions must not reuse a restored voter's number.
        nextSerial = max(nextSerial, p.recovered.highestVoteSession + 1)
        persistence = p
        server.addBeforeFlushHook { [unowned p] in p.beforeFlush() }
        server.addTickHook { [unowned self, unowned p] in p.tick(map: self.hub, panic: self.panic) }
        server.addStopHook { [unowned self, unowned p] in p.shutdown(map: self.hub, panic: self.panic) }
    }

    /// Journals the pin's state after a successful write (a removal when it is gone).
    func journalPin(_ id: PinID) {
        persistence?.record(.pinState(id, in: hub))
    }

    /// Wall-clock Unix milliseconds: pin times are client-visible dates.
    static func wallClockMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    public func opened(_ connection: Connection) {
        let now = monotonicMilliseconds()
        let settings = hub.settings
        let session = Session(
            serial: nextSerial,
            id: Base64URL.encode(secrets.randomBytes(16)),
            writes: TokenBucket(capacity: settings.writeBurst, perMinute: settings.writesPerMinute, nowMs: now),
            messages: TokenBucket(capacity: server.config.messageBurst, perMinute: server.config.messagesPerSecond * 60, nowMs: now))
        nextSerial += 1
        connection.userData = session
        send(connection) { w in ServerMessages.welcome(session: session.id, settings: settings, limits: limits, into: &w) }
    }

    public func closed(_ connection: Connection) {
        hub.unsubscribe(connection.fd)
        panic.disconnected(connection.fd, out: &panicDeliveries)
        connection.userData = nil
        fanOutPanic()
    }

    public func received(_ connection: Connection, kind: MessageKind, payload: UnsafeRawBufferPointer) {
        guard let session = connection.userData as? Session else { return }
        let now = monotonicMilliseconds()
        if session.messages.take(nowMs: now) != nil {
            // Abuse, not a mistake: a client this far over the message rate is closed (1008).
            connection.close(code: .policyViolation, reason: "message rate limit")
            return
        }
        guard kind == .text else {
            reply(connection, error: RequestError("bad_message", "messages are JSON text; binary messages are not accepted"), ref: nil)
            return
        }
        let request: ClientRequest
        switch decoder.decode(payload) {
        case .success(let r): request = r
        case .failure(let rejected):
            reply(connection, error: rejected.error, ref: rejected.ref)
            return
        }
        if request.operation.isWrite, let retry = session.writes.take(nowMs: now) {
            reply(connection, error: RequestError("rate_limited", "too many writes; retry after \(retry) ms", retryAfterMs: retry), ref: request.ref)
            return
        }
        apply(request, session: session, connection: connection)
        fanOut()
        fanOutPanic()
    }

    private func apply(_ request: ClientRequest, session: Session, connection: Connection) {
        let ref = request.ref
        let wallNow = Self.wallClockMs()
        if applyPanic(request.operation, ref: ref, connection: connection, now: wallNow) { return }
        switch request.operation {
        case .subscribe(let area, let categories):
            let result = hub.subscribe(connection.fd, area: area, categories: categories)
            send(connection) { w in
                ServerMessages.ok(ref: ref, into: &w) { w in
                    w.key("pins")
                    w.beginArray()
                    for pin in result.pins { ServerMessages.pin(pin, into: &w) }
                    w.endArray()
                    if result.truncated { w.key("truncated"); w.bool(true) }
                }
            }
        case .unsubscribe:
            hub.unsubscribe(connection.fd)
            send(connection) { w in ServerMessages.ok(ref: ref, into: &w) }
        case .pinCreate(let draft):
            let token = secrets.newToken()
            let id = PinID(random: secrets.randomBytes(16))
            switch hub.create(draft, id: id, editDigest: secrets.digest(ofToken: token), now: wallNow, out: &deliveries) {
            case .success(let pin):
                journalPin(pin.id)
                send(connection) { w in
                    ServerMessages.ok(ref: ref, into: &w) { w in
                        w.key("pin"); ServerMessages.pin(pin, into: &w)
                        w.key("edit_token"); w.string(token)
                    }
                }
            case .failure(let failure):
                reply(connection, error: .from(failure), ref: ref)
            }
        case .pinUpdate(let id, let token, let changes):
            guard let id else { return reply(connection, error: .from(PinFailure.forbidden), ref: ref) }
            let result = hub.update(id, digest: secrets.digest(ofToken: token), changes: changes, now: wallNow, out: &deliveries)
            if case .success = result { journalPin(id) }
            replyWithPin(connection, ref: ref, result)
        case .pinDelete(let id, let token):
            guard let id else { return reply(connection, error: .from(PinFailure.forbidden), ref: ref) }
            switch hub.delete(id, digest: secrets.digest(ofToken: token), out: &deliveries) {
            case .success(let pin):
                journalPin(pin.id)
                send(connection) { w in ServerMessages.ok(ref: ref, into: &w) { w in w.key("id"); w.string(pin.id.description) } }
            case .failure(let failure):
                reply(connection, error: .from(failure), ref: ref)
            }
        case .pinVote(let id, let value):
            guard let id else { return reply(connection, error: .from(PinFailure.notFound), ref: ref) }
            let result = hub.vote(id, session: session.serial, value: value, now: wallNow, out: &deliveries)
            if case .success = result { journalPin(id) }
            replyWithPin(connection, ref: ref, result)
        default:
            preconditionFailure("panic operations are applied by applyPanic")
        }
    }

    private func replyWithPin(_ connection: Connection, ref: JSONValue?, _ result: Result<Pin, PinFailure>) {
        switch result {
        case .success(let pin):
            send(connection) { w in ServerMessages.ok(ref: ref, into: &w) { w in w.key("pin"); ServerMessages.pin(pin, into: &w) } }
        case .failure(let failure):
            reply(connection, error: .from(failure), ref: ref)
        }
    }

    func reply(_ connection: Connection, error: RequestError, ref: JSONValue?) {
        send(connection) { w in ServerMessages.error(ref: ref, error, into: &w) }
    }

    /// Encodes one message into the reused writer and sends it as one text frame.
    func send(_ connection: Connection, _ encode: (inout JSONWriter) -> Void) {
        writer.reset()
        encode(&writer)
        writer.bytes.withUnsafeBytes { connection.send(.text, payload: $0) }
    }

    /// Encodes each pending delivery once and queues the same frame on every recipient.
    private func fanOut() {
        guard !deliveries.isEmpty else { return }
        for delivery in deliveries {
            writer.reset()
            ServerMessages.pinEvent(delivery.kind, delivery.pin, into: &writer)
            let frame = writer.bytes.withUnsafeBytes { SharedFrame.text($0) }
            for subscriber in delivery.recipients {
                server.connection(fd: subscriber)?.send(shared: frame)
            }
        }
        deliveries.removeAll(keepingCapacity: true)
    }

    private func tick() {
        let now = Self.wallClockMs()
        hub.expire(now: now, out: &deliveries)
        fanOut()
        panic.tick(now: now, out: &panicDeliveries)
        fanOutPanic()
    }
}

/// Capability tokens and randomness from OpenSSL.
public struct OpenSSLSecrets: Secrets {
    public init() {}
    public func randomBytes(_ count: Int) -> [UInt8] { SecureRandom.bytes(count: count) }
    public func digest(ofToken token: String) -> TokenDigest { TokenDigest(bytes: Crypto.sha256(Array(token.utf8))) }
}
