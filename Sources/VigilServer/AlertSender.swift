import Logging
import VigilCore
import VigilHTTPClient
import VigilLoop
import VigilPush
import VigilWire

/// The counts `/metrics` shows for notices (docs/OPERATIONS.md).
struct AlertCounters {
    enum Channel: String, CaseIterable {
        case webpush, relay

        init(_ target: CheckinSubscription.Target) {
            switch target {
            case .webPush: self = .webpush
            case .relay: self = .relay
            }
        }
    }
    /// Every label `failed` can have.
    static let failureReasons = ["gone", "throttled", "http_4xx", "http_5xx", "unbuildable", "client"]
        + HTTPClientFailure.Kind.allCases.map(\.rawValue)
    /// Requests sent, by channel.
    var sent: [Channel: Int] = [:]
    /// Attempts after the first.
    var retries = 0
    /// Attempts that did not deliver, by reason (`http_4xx`, `http_5xx`, `throttled`, the client's failure kinds).
    var failed: [String: Int] = [:]
    var settled: [DeliverySettlement: Int] = [:]
    /// Deliveries left out because `push.max_pending` were waiting.
    var refusedPending = 0
    /// From the change that caused a notice to the service's acceptance, summed over deliveries.
    var deliveredDelayMs: Int64 = 0
    /// Ladder steps that came due, by what became of them (`escalationOutcomes`).
    var escalations: [String: Int] = [:]
    static let escalationOutcomes = ["sent", "acknowledged", "ended", "expired"]
}

/// Sends notices to subscriptions on the loop, never blocking it: a `NoticeBoard` decides what
/// is due and what an answer means; this class turns due deliveries into Web Push requests
/// (RFC 8030 with RFC 8291 encryption and RFC 8292 VAPID) or signed webhooks, hands them to the
/// loop's HTTP client, and feeds the answers back. At most `maxStartsPerTurn` requests are built
/// in one turn (each costs an ECDH and a signature): more due asks for another turn, so replies
/// and fan-out in between are not held up by a large circle's notices.
///
/// The application owns the state: it looks subscriptions up (`lookup`), journals settlements
/// (`settled`) and removes subscriptions a service says are gone (`gone`).
final class AlertSender {
    typealias Board = NoticeBoard<SubscriptionID>

    static let maxStartsPerTurn = 32
    /// Requests sent and not yet answered, in all: enough to keep every origin's connections busy,
    /// few enough that requests are built shortly before a connection can take them (a request
    /// built long before waits in the client's queue, and one past its queue bound is refused).
    static let maxInFlight = 64
    /// A VAPID token is signed once per push service origin and reused until this long before
    /// it expires (tokens live `VAPIDSigner.defaultLifetime`, 12 h).
    static let tokenRenewalSeconds: Int64 = 3_600
    static let requestTimeoutMs: Int64 = 30_000

    private(set) var board: Board
    let push: PushConfig
    private let loop: EventLoop
    private let logger: Logger
    private var client: HTTPClient?
    var counters = AlertCounters()
    /// Circles of the notices on the board (the board keeps notices; subscriptions live in circles).
    var lookup: (CircleID, SubscriptionID) -> CheckinSubscription? = { _, _ in nil }
    /// Subscriptions' keys as validated for encryption, by subscription (a key is checked in full
    /// once, not at every message); dropped whole past `maxCachedKeys`.
    private var keys: [SubscriptionID: (p256dh: [UInt8], auth: [UInt8], keys: PushSubscriptionKeys)] = [:]
    static let maxCachedKeys = 100_000
    /// The VAPID `Authorization` value per push service origin, and when it must be renewed.
    private var tokens: [String: (value: String, renewAt: Int64)] = [:]
    var settled: (NoticeSettlement) -> Void = { _ in }
    var gone: (CircleID, SubscriptionID) -> Void = { _, _ in }

    init(push: PushConfig, loop: EventLoop, logger: Logger) {
        self.push = push
        var settings = NoticeSettings()
        settings.maxPending = push.maxPending
        settings.ttlMs = Int64(push.ttlSeconds) * 1000
        self.board = Board(settings: settings)
        self.loop = loop
        self.logger = logger
    }

    var httpCounters: HTTPClientCounters? { client?.snapshot }

    /// Queues `notice` for the subscriptions of its audience among `subscriptions` (the circle's).
    func post(_ notice: Notice, subscriptions: [CheckinSubscription], now: Int64) {
        let reachable = subscriptions.filter { usable($0.target) }
        let posted = board.post(notice, to: reachable.map { ($0.id, $0.holder) }, now: now)
        counters.refusedPending += posted.refused
        if posted.refused > 0 {
            logger.warning("notices refused: push.max_pending deliveries wait already", metadata: ["refused": "\(posted.refused)"])
        }
    }

    /// A settlement recovered from the journal or a snapshot, before the notices are posted again.
    func restore(_ settlement: NoticeSettlement) {
        board.settle(settlement.key, as: settlement.settlement)
    }

    /// An acknowledgement: the holder's waiting deliveries of the notice, at every escalation step,
    /// are cancelled (its other devices stop being told); one in flight is not retried.
    func acknowledged(_ ack: NoticeAck, steps: Int) {
        for step in 0...steps {
            counters.settled[.cancelled, default: 0] += board.cancel(ack.notice.atStep(UInt8(clamping: step)), for: ack.by).count
        }
    }

    /// Starts what is due (up to the per-turn and in-flight bounds); asks for another turn when
    /// more is due now. Expired deliveries are settled by `prune`, from the tick.
    func pump(now: Int64) {
        let room = min(Self.maxStartsPerTurn, Self.maxInFlight - board.inFlightCount)
        guard room > 0, let due = board.nextDue, due <= now else { return }
        for attempt in board.takeDue(now: now, limit: room) { start(attempt, now: now) }
        if let next = board.nextDue, next <= now, board.inFlightCount < Self.maxInFlight { loop.requestTurn() }
    }

    /// Settles deliveries whose notices outlived their time to live; forgets old notices.
    func prune(now: Int64) {
        for (key, notice) in board.prune(now: now) { settle(key, of: notice, .expired) }
    }

    func close() {
        client?.close()
    }

    // MARK: sending

    private func usable(_ target: CheckinSubscription.Target) -> Bool {
        switch target {
        case .webPush: return push.vapid != nil
        case .relay: return push.relay != nil
        }
    }

    private func start(_ attempt: Board.Attempt, now: Int64) {
        let notice = attempt.notice
        guard let subscription = lookup(notice.circle, attempt.key.target), usable(subscription.target) else {
            // Removed since it was posted (unregistered, revoked, circle closed, channel turned off).
            board.settle(attempt.key, as: .cancelled)
            settle(attempt.key, of: notice, .cancelled)
            return
        }
        if attempt.number > 1 { counters.retries += 1 }
        let request: (OutgoingRequest, HTTPOrigin, AlertCounters.Channel)
        do {
            request = try build(notice, for: subscription, deliveryID: "\(notice.id).\(attempt.key.target)", now: now)
        } catch {
            // The error's type only: an endpoint's error text can name its host.
            logger.warning("a notice could not be built for a subscription; given up",
                           metadata: ["kind": "\(notice.kind.name)", "error": "\(type(of: error))"])
            finish(attempt, .refused(status: 0), channel: nil, failure: "unbuildable", now: now)
            return
        }
        counters.sent[request.2, default: 0] += 1
        let client: HTTPClient
        do { client = try httpClient() } catch {
            logger.error("the HTTP client for notices could not start", metadata: ["error": "\(error)"])
            finish(attempt, .failed, channel: request.2, failure: "client", now: now)
            return
        }
        let channel = request.2
        client.send(request.0, to: request.1, deadline: monotonicMilliseconds() + Self.requestTimeoutMs) { [weak self] outcome in
            guard let self else { return }
            let (result, reason) = Self.result(of: outcome)
            self.finish(attempt, result, channel: channel, failure: reason, now: V1Application.wallClockMs())
        }
    }

    private func finish(_ attempt: Board.Attempt, _ result: DeliveryResult, channel: AlertCounters.Channel?, failure: String?,
                        now: Int64) {
        if let failure { counters.failed[failure, default: 0] += 1 }
        var random: UInt64 = 0
        withUnsafeMutableBytes(of: &random) { $0.copyBytes(from: SecureRandom.bytes(count: 8)) }
        switch board.finished(attempt.key, result, now: now, random: random) {
        case .settled(let settlement)?:
            if settlement == .delivered { counters.deliveredDelayMs += max(0, now - attempt.notice.at) }
            settle(attempt.key, of: attempt.notice, settlement)
            if settlement == .gone { gone(attempt.notice.circle, attempt.key.target) }
        case .retry?, nil:
            break
        }
        if logger.logLevel <= .debug {
            logger.debug("notice attempt", metadata: ["kind": "\(attempt.notice.kind.name)", "attempt": "\(attempt.number)",
                                                      "channel": "\(channel?.rawValue ?? "none")", "result": "\(failure ?? "accepted")"])
        }
    }

    private func settle(_ key: Board.Key, of notice: Notice, _ settlement: DeliverySettlement) {
        counters.settled[settlement, default: 0] += 1
        settled(NoticeSettlement(circle: notice.circle, notice: key.notice, subscription: key.target, settlement: settlement))
    }

    /// The request for one delivery: an encrypted push message, or a signed webhook.
    private func build(_ notice: Notice, for subscription: CheckinSubscription, deliveryID: String, now: Int64) throws
        -> (OutgoingRequest, HTTPOrigin, AlertCounters.Channel) {
        let ttlSeconds = max(0, Int((notice.expiresAt - now) / 1000))
        switch subscription.target {
        case .webPush(let endpoint, let p256dh, let auth):
            guard let signer = push.vapid else { throw AlertBuildError.channelOff }
            let url = try PushEndpoint(endpoint, allowLoopbackHTTP: push.allowLoopbackHTTP)
            let keys = try subscriptionKeys(subscription.id, p256dh: p256dh, auth: auth)
            let message = try WebPushRequest(notice: NoticePayload.push(notice), subscription: keys, endpoint: url,
                                          authorization: try authorization(signer, for: url, now: now / 1000), ttl: ttlSeconds,
                                          urgency: NoticePayload.isUrgent(notice) ? .high : .normal, topic: Self.topic(notice))
            let target = try OutgoingURL(parsing: url.url)
            return (OutgoingRequest(method: "POST", target: target.target, headers: message.headers, body: message.body), target.origin, .webpush)
        case .relay(let handle):
            guard let relay = push.relay else { throw AlertBuildError.channelOff }
            let url = try OutgoingURL(parsing: relay.endpoint.url)
            let body = NoticePayload.webhook(notice, handle: handle)
            var headers = try WebhookSignature.headers(id: deliveryID, timestamp: now / 1000, body: body, secrets: [relay.secret])
            headers.append(("Content-Type", "application/json"))
            return (OutgoingRequest(method: "POST", target: url.target, headers: headers, body: body), url.origin, .relay)
        }
    }

    private func subscriptionKeys(_ id: SubscriptionID, p256dh: [UInt8], auth: [UInt8]) throws -> PushSubscriptionKeys {
        if let held = keys[id], held.p256dh == p256dh, held.auth == auth { return held.keys }
        let made = try PushSubscriptionKeys(p256dh: P256PublicKey(bytes: p256dh), authSecret: auth)
        if keys.count >= Self.maxCachedKeys { keys.removeAll() }
        keys[id] = (p256dh, auth, made)
        return made
    }

    private func authorization(_ signer: VAPIDSigner, for endpoint: PushEndpoint, now: Int64) throws -> String {
        if let held = tokens[endpoint.origin], now < held.renewAt { return held.value }
        let value = try signer.authorization(for: endpoint, now: now)
        if tokens.count >= Self.maxCachedKeys { tokens.removeAll() }
        tokens[endpoint.origin] = (value, now + VAPIDSigner.defaultLifetime - Self.tokenRenewalSeconds)
        return value
    }

    /// RFC 8030 §5.4: a newer message with the same topic replaces one the push service still
    /// holds. One topic per stream (its start, escalation and end replace each other) and one per
    /// circle's check-ins; 24 bytes of a hash of the subject, so the service learns no id.
    static func topic(_ notice: Notice) -> String {
        var input = Array("vigil-topic".utf8)
        input += NoticeID(kind: notice.kind.isAboutStream ? .panicStarted : .checkinRequested,
                          subjectHigh: notice.id.subjectHigh, subjectLow: notice.id.subjectLow, at: 0).bytes
        return Base64URL.encode(Array(Crypto.sha256(input).prefix(24)))
    }

    /// An HTTP outcome as the board reads it, and the failure's label for the metrics (nil: delivered).
    static func result(of outcome: HTTPOutcome) -> (DeliveryResult, String?) {
        switch outcome {
        case .response(let r): return result(status: r.status, retryAfterSeconds: r.retryAfterSeconds)
        case .failure(let f): return result(of: f)
        }
    }

    /// RFC 8030 §5 and the push services' documented answers: 2xx taken; 404 and 410 the
    /// subscription is gone; 429 and 503 throttled (with `Retry-After` when given); any other 4xx
    /// will not get better (413 too large, 400/401/403 a request or key the service refuses);
    /// other 5xx worth another try.
    static func result(status: Int, retryAfterSeconds: Int64?) -> (DeliveryResult, String?) {
        switch status {
        case 200..<300: return (.accepted, nil)
        case 404, 410: return (.gone, "gone")
        case 429, 503: return (.throttled(retryAfterMs: retryAfterSeconds.map { $0.multipliedReportingOverflow(by: 1000).overflow ? .max : $0 * 1000 }), "throttled")
        case 400..<500: return (.refused(status: status), "http_4xx")
        default: return (.failed, "http_5xx")
        }
    }

    /// No answer: a request the client refused to send (invalid, or to an address the policy
    /// refuses) will not get better; the rest (DNS, connect, TLS, timeout, a dropped connection,
    /// a full queue) is worth another try.
    static func result(of failure: HTTPClientFailure) -> (DeliveryResult, String?) {
        switch failure {
        case .invalidRequest, .destinationRefused: return (.refused(status: 0), failure.kind.rawValue)
        // Nothing was sent: tried again soon, not after a backoff meant for a failing service.
        case .queueFull: return (.throttled(retryAfterMs: 100), failure.kind.rawValue)
        default: return (.failed, failure.kind.rawValue)
        }
    }

    private func httpClient() throws -> HTTPClient {
        if let client { return client }
        var settings = HTTPClientSettings()
        settings.destinations = .publicOnly(allowLoopback: push.allowLoopbackHTTP, allowPrivate: push.allowPrivateAddresses)
        // No logger: the client's debug lines name origins (a push service's host and port), which
        // vigild never logs; what became of a request is logged here, without them.
        let made = try HTTPClient(settings: settings, loop: loop, logger: nil)
        client = made
        return made
    }
}

enum AlertBuildError: Error, CustomStringConvertible {
    case channelOff
    var description: String { "the subscription's channel is not configured" }
}
