import VigilLoop
import VigilNATS

/// Reads a stream in stream-sequence order, each message once, from a given sequence, and keeps
/// reading across lost messages, lost consumers and reconnections (the rules are
/// `JSOrderedConsumption`'s; this class does their I/O).
///
/// Behind it is an ephemeral push consumer (`JSOrderedConsumerConfig`) delivering to a fresh
/// `_INBOX.<random>` subject. A reset (a gap, a heartbeat that shows one, heartbeats that stop,
/// a reconnection) drops that subscription, asks the server to delete the old consumer (best
/// effort: it also expires by itself) and creates a new one from the sequence after the last one
/// delivered. A creation attempt waits `createTimeoutMs` for its answer; one that times out is
/// retried at once, one refused after `retryMs`. Nothing is buffered here: each message goes to
/// `deliver` as it arrives, in order.
///
/// The consumer is declared lost (and recreated) after 3 × `heartbeatMs` without a message or a
/// heartbeat, on a 409 status ("Consumer Deleted"), and when a publish was acknowledged
/// (`acknowledged`) but nothing at all was delivered for `noProgressMs` since.
public final class OrderedConsumer {
    public typealias Delivery = (_ streamSequence: UInt64, _ message: NATSMessage) -> Void

    private let jetStream: JetStream
    private let stream: String
    private let filterSubject: String?
    private let heartbeatMs: Int64
    private let retryMs: Int64
    private let createTimeoutMs: Int64
    private let noProgressMs: Int64
    private let deliver: Delivery
    private var consumption: JSOrderedConsumption
    /// The current consumer's subscription, and its name once the server created it.
    private var sid: UInt64?
    private var consumerName: String?
    /// Bumped by every reset: a creation reply for an older attempt is ignored.
    private var attempt = 0
    private var lastActivityMs: Int64 = 0
    private var retryAtMs: Int64?
    private var stopped = false
    /// Its state observer and tick handler on the client, removed by `stop()`.
    private var handlers: [NATSClient.HandlerToken] = []

    /// Why the last creation failed, nil while consuming (for `/healthz` and logs).
    public private(set) var lastError: String?
    /// Consumers created so far (1 after a clean start; each reset adds one).
    public private(set) var consumersCreated = 0
    /// Why the consumer was declared lost, from then until its replacement is created (nil
    /// otherwise): while set, deliveries (and so confirmations of writes) have stopped.
    public private(set) var lost: String?
    /// Resets by reason (`heartbeat`, `deleted`, `no_progress`, `gap`), for `/metrics`.
    public private(set) var resetsByReason: [String: Int] = [:]
    /// The current consumer's name and the server it lives on (empty until known).
    public var name: String { consumerName ?? "" }
    public private(set) var server = ""

    public init(jetStream: JetStream, stream: String, startAfter lastApplied: UInt64, filterSubject: String? = nil,
                heartbeatMs: Int64 = 5_000, retryMs: Int64 = 1_000, createTimeoutMs: Int64? = nil, noProgressMs: Int64? = nil,
                deliver: @escaping Delivery) {
        self.jetStream = jetStream
        self.stream = stream
        self.filterSubject = filterSubject
        self.heartbeatMs = heartbeatMs
        self.retryMs = retryMs
        self.createTimeoutMs = createTimeoutMs ?? jetStream.timeoutMs
        self.noProgressMs = noProgressMs ?? max(self.createTimeoutMs, heartbeatMs)
        self.deliver = deliver
        consumption = JSOrderedConsumption(startAfter: lastApplied)
        let client = jetStream.client
        handlers.append(client.addStateObserver { [weak self] state, _ in
            guard let self, !self.stopped else { return }
            // A new connection: the old consumer's deliveries went to a subscription the server
            // forgot (and after a server restart the consumer itself is gone). Start over.
            if state == .connected { self.recreate() }
        })
        handlers.append(client.addTickHandler { [weak self] now in self?.tick(nowMs: now) })
        if client.state == .connected { recreate() }
    }

    /// The last stream sequence delivered.
    public var lastStreamSequence: UInt64 { consumption.lastStreamSequence }
    public var resets: Int { consumption.resets }

    /// Stops delivering, deletes the consumer (best effort) and leaves the client as it found it.
    public func stop() {
        stopped = true
        dropConsumer()
        for token in handlers { jetStream.client.removeHandler(token) }
        handlers.removeAll()
    }

    private func tick(nowMs: Int64) {
        guard !stopped, jetStream.client.state == .connected else { return }
        if let retryAt = retryAtMs {
            if nowMs >= retryAt { recreate() }
            return
        }
        guard consumerName != nil else { return }
        // Three heartbeat intervals without a message or a heartbeat: the consumer is lost.
        if nowMs - lastActivityMs > 3 * heartbeatMs {
            declareLost("no heartbeat for \(nowMs - lastActivityMs) ms", reason: "heartbeat")
            apply(consumption.heartbeatsMissed())
            return
        }
        let verdict = consumption.tick(nowMs: nowMs, noProgressMs: noProgressMs)
        if case .reset = verdict {
            declareLost("a write was acknowledged at \(consumption.awaitedSequence) but nothing was delivered for \(noProgressMs) ms",
                        reason: "no_progress")
        }
        apply(verdict)
    }

    /// A publish was acknowledged at `sequence`: the consumer must deliver it soon.
    public func acknowledged(sequence: UInt64) {
        consumption.acknowledged(sequence: sequence, nowMs: monotonicMilliseconds())
    }

    private func declareLost(_ why: String, reason: String) {
        lost = "consumer lost (\(why)); recreating"
        resetsByReason[reason, default: 0] += 1
    }

    private func received(_ message: NATSMessage, attempt: Int) {
        guard !stopped, attempt == self.attempt else { return }
        lastActivityMs = monotonicMilliseconds()
        let verdict = consumption.received(message)
        if case .apply(let sequence) = verdict {
            deliver(sequence, message)
        } else {
            if case .reset = verdict {
                if message.status == 409 {
                    declareLost("the server deleted it: \(message.headers?.statusDescription ?? "409")", reason: "deleted")
                } else {
                    resetsByReason["gap", default: 0] += 1
                }
            }
            apply(verdict)
        }
    }

    private func apply(_ verdict: JSOrderedConsumption.Verdict) {
        switch verdict {
        case .apply, .none:
            break
        case .respond(let subject):
            try? jetStream.client.publish(subject: subject, payload: [])
        case .reset:
            recreate()
        }
    }

    private func dropConsumer() {
        if let sid { jetStream.client.unsubscribe(sid) }
        sid = nil
        if let name = consumerName {
            try? jetStream.client.request(subject: JSAPI.consumerDelete(stream, name), payload: [],
                                          timeoutMs: jetStream.timeoutMs) { _ in }
        }
        consumerName = nil
        server = ""
    }

    /// A new subscription and a new consumer from the sequence after the last one delivered.
    private func recreate() {
        dropConsumer()
        attempt += 1
        let attempt = self.attempt
        retryAtMs = nil
        let client = jetStream.client
        let deliverSubject = "_INBOX." + client.randomToken(length: 22)
        let config = JSOrderedConsumerConfig(stream: stream, deliverSubject: deliverSubject,
                                             startSequence: consumption.nextStreamSequence,
                                             filterSubject: filterSubject, heartbeatMs: heartbeatMs, inactiveSeconds: 30)
        do throws(NATSClientError) {
            sid = try client.subscribe(subject: deliverSubject) { [weak self] message in
                self?.received(message, attempt: attempt)
            }
            try client.request(subject: JSAPI.consumerCreate(stream), payload: config.encode(),
                               timeoutMs: createTimeoutMs) { [weak self] result in
                self?.created(result, attempt: attempt)
            }
        } catch {
            failed(error.description)
        }
    }

    private func created(_ result: Result<NATSMessage, NATSClientError>, attempt: Int) {
        guard !stopped, attempt == self.attempt else { return }
        switch JetStream.decode(result, JSOrderedConsumerConfig.decodeCreated) {
        case .success(let created):
            consumerName = created.name
            server = created.server
            consumersCreated += 1
            lastError = nil
            lost = nil
            lastActivityMs = monotonicMilliseconds()
            consumption.consumerCreated(nowMs: lastActivityMs)
        case .failure(.client(.timedOut)):
            // Unanswered (the meta leader or the chosen server is gone): ask again at once.
            failed(NATSClientError.timedOut.description, retryInMs: 0)
        case .failure(let error):
            failed(error.description)
        }
    }

    private func failed(_ reason: String, retryInMs: Int64? = nil) {
        lastError = reason
        dropConsumer()
        retryAtMs = monotonicMilliseconds() + (retryInMs ?? retryMs)
    }
}
