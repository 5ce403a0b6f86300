import Logging
import VigilReplication
import VigilLoop
import VigilNATS
import VigilCore
import VigilState

/// What a cluster node's `/v1` needs of the replicated log: publish a record, know its own
/// writes again when the stream hands them back, say whether writes are taken. `ReplicatedLog`
/// is the JetStream one; the glue tests run two nodes over an in-memory one.
protocol ReplicationLog: AnyObject {
    var settings: ReplicationSettings { get }
    /// Connected, the stream ready, and caught up: writes are taken.
    var writable: Bool { get }
    /// What a refused writer is told to wait.
    var retryAfterMs: Int64 { get }
    /// The last stream sequence applied (what a snapshot taken now holds at least).
    var appliedSequence: UInt64 { get }
    /// A new message id of this node's run, and the number in it.
    func nextMessageID() -> (id: String, number: UInt64)
    /// The number in a message id of this node's run, nil for anyone else's.
    func ownWriteNumber(_ messageID: String?) -> UInt64?
    /// Publishes `record`, with the answer kept for its idempotency key in the same message
    /// (`kept`, docs/CLUSTER.md "Idempotency keys"); `completion` (on the loop, possibly at once)
    /// learns its sequence or why it was not stored.
    func publish(_ record: JournalRecord, kept: KeptAnswer?, subject: String, messageID: String, base: UInt64?,
                 completion: @escaping (Result<UInt64, JetStreamError>) -> Void)
    /// Sends a watcher-count message to the other nodes (not stored; lost when disconnected).
    func publishPresence(_ payload: [UInt8])
    /// The connection's part of `/healthz`'s `cluster` object.
    func health(into w: inout JSONWriter)
    /// The log's part of `/metrics`.
    func metrics(_ sync: inout MetricsSync)
    /// A held write's publish went out again (counted).
    func countRepublished()
}

extension ReplicationLog {
    func metrics(_ sync: inout MetricsSync) {}
    func countRepublished() {}
}

/// The replicated log of a cluster node (docs/CLUSTER.md): the JetStream stream every node
/// publishes its changes to and applies, in stream order, to its own memory.
///
/// It owns the NATS client and the ordered consumer, and knows nothing of pins or sockets:
/// it publishes a `JournalRecord` (the journal's own encoding, framed with its checksum) with
/// its message id and precondition, and hands every record of the stream, in order, to
/// `deliver`. `/v1` (`V1Application+Cluster`) decides what a record means.
///
/// Writable means: connected, the stream found (or created) as configured, and the node caught
/// up with the stream as it was when the node (re)joined it: a node that validated writes
/// against state it has not caught up on would only collect conflicts. While not writable,
/// writes are refused with `unavailable` and a retry time; reads and live events go on.
final class ReplicatedLog: ReplicationLog {
    /// One record of the stream, as `deliver` gets it.
    struct Entry {
        let sequence: UInt64
        /// `Nats-Msg-Id`: `<node>-<boot>-<n>` for a write, or a decision's own id.
        let messageID: String?
        /// The precondition the writer validated against (`Vigil-Base`), if any.
        let base: UInt64?
        /// nil when the bytes are not a record this build can read (counted, logged, skipped).
        let record: JournalRecord?
        /// The node whose publish the stream kept (`Vigil-Node`): for a decision every node
        /// publishes under one message id, the one JetStream stored, so exactly one node.
        var publisher: String? = nil
        /// The answer kept for the write's idempotency key, published in the same message (a
        /// second record, `answerKept`): kept by every node that applies the record.
        var kept: KeptAnswer? = nil
    }

    static let baseHeader = "Vigil-Base"
    static let publisherHeader = "Vigil-Node"

    let settings: ReplicationSettings
    let client: NATSClient
    let jetStream: JetStream
    private let logger: Logger
    private let deliver: (Entry) -> Void
    private var consumer: OrderedConsumer?
    /// The stream as found at the last (re)connection.
    private(set) var streamReady = false
    /// The stream's last sequence when this node last found it: caught up once applied up to it.
    private(set) var catchUpTarget: UInt64 = 0
    private(set) var appliedSequence: UInt64
    /// The highest sequence this node has seen acknowledged or applied (for the lag).
    private(set) var knownLastSequence: UInt64 = 0
    private(set) var lastError: String?
    /// The stream's settings that differ from the config's without breaking the node (replicas,
    /// max_age, max_bytes, …): logged at each (re)connection and shown in `/healthz`.
    private(set) var streamDiffers: [JSStreamDifference] = []
    /// When a publish or probe last went unanswered while none has been acknowledged since (the
    /// stream has no leader, or this node cannot reach it): writes are refused until an
    /// acknowledgement (or a probe's answer) comes.
    private(set) var stalledSinceMs: Int64?
    private var probing = false
    private var nextProbeMs: Int64 = 0
    /// The stream's leader as last seen by STREAM.INFO (empty outside a NATS cluster).
    private(set) var streamLeader = ""
    /// Milliseconds spent not writable since start (`vigil_cluster_unwritable_seconds_total`).
    private(set) var unwritableMs: Int64 = 0
    private var lastTickMs: Int64?
    private(set) var republished = 0
    private(set) var undecodable = 0
    private(set) var published = 0
    private(set) var publishFailures = 0
    /// This run's part of every message id: writes of an earlier run of this node never match.
    let bootTag: String
    private var nextWrite: UInt64 = 1
    private var retryAtMs: Int64?
    /// Set while the node waits for a snapshot from the cluster (the stream's retention passed
    /// its state): `needsSnapshot` was told the stream's first sequence.
    private(set) var awaitingSnapshot = false
    /// Told when the stream no longer holds the records after this node's state: the node must
    /// restore a published snapshot and then call `resume(after:)`.
    var needsSnapshot: ((_ firstSequence: UInt64, _ lastSequence: UInt64) -> Void)?

    /// Throws when the TLS setup the config asks for cannot be made (a CA or key file gone since
    /// the config was checked).
    init(settings: ReplicationSettings, startAfter: UInt64, loop: EventLoop, logger: Logger, deliver: @escaping (Entry) -> Void) throws {
        self.settings = settings
        self.logger = logger
        self.deliver = deliver
        appliedSequence = startAfter
        knownLastSequence = startAfter
        var clientSettings = NATSClientSettings()
        clientSettings.connectTimeoutMs = min(Int64(settings.requestTimeoutMs), 5_000)
        clientSettings.pingIntervalMs = Int64(settings.pingIntervalMs)
        client = try settings.makeClient(settings: clientSettings, loop: loop)
        jetStream = JetStream(client: client, timeoutMs: Int64(settings.requestTimeoutMs))
        bootTag = client.randomToken(length: 8)
        client.addStateObserver { [unowned self] state, reason in self.clientChanged(state, reason: reason) }
        client.addTickHandler { [unowned self] now in self.tick(nowMs: now) }
    }

    func start() throws(SystemError) {
        try client.start()
    }

    func stop() {
        consumer?.stop()
        client.close()
    }

    var connected: Bool { client.state == .connected }
    var caughtUp: Bool { appliedSequence >= catchUpTarget }
    /// What `writable` and `refusal` are decided from (`WritableReason`).
    var writability: WritableReason {
        WritableReason(connected: connected, streamReady: streamReady, lastError: lastError, awaitingSnapshot: awaitingSnapshot,
                       stalledForMs: stalledSinceMs.map { monotonicMilliseconds() - $0 }, consumerLost: consumer?.lost, caughtUp: caughtUp)
    }
    var writable: Bool { writability.writable }
    var lag: UInt64 { knownLastSequence > appliedSequence ? knownLastSequence - appliedSequence : 0 }

    /// Why writes are refused now (nil while writable), for logs and `/healthz`.
    var refusal: String? { writability.refusal }

    /// What a refused writer is told to wait.
    var retryAfterMs: Int64 { connected ? 250 : 500 }

    /// A new message id of this node's run, and the number in it.
    func nextMessageID() -> (id: String, number: UInt64) {
        defer { nextWrite += 1 }
        return ("\(settings.nodeID)-\(bootTag)-\(nextWrite)", nextWrite)
    }

    /// The number in a message id of this node's run, nil for anyone else's.
    func ownWriteNumber(_ messageID: String?) -> UInt64? {
        guard let messageID else { return nil }
        let prefix = "\(settings.nodeID)-\(bootTag)-"
        guard messageID.hasPrefix(prefix) else { return nil }
        return UInt64(messageID.dropFirst(prefix.count))
    }

    /// Publishes `record`; `completion` (on the loop) learns JetStream's sequence for it, or why
    /// it was not stored (then it is not in the stream, or — after a timeout — its fate is unknown
    /// until the consumer reaches it).
    func publish(_ record: JournalRecord, kept: KeptAnswer?, subject: String, messageID: String, base: UInt64?,
                 completion: @escaping (Result<UInt64, JetStreamError>) -> Void) {
        var payload = JournalCodec.encode(record)
        if let kept { JournalCodec.append(.answerKept(kept), to: &payload) }
        var headers: [(name: String, value: String)] = base.map { [(name: Self.baseHeader, value: String($0))] } ?? []
        headers.append((name: Self.publisherHeader, value: settings.nodeID))
        do throws(NATSClientError) {
            try jetStream.publish(subject: subject, messageID: messageID, headers: headers, payload: payload,
                                  ackTimeoutMs: Int64(settings.ackTimeoutMs)) {
                [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let ack):
                    self.published += 1
                    self.knownLastSequence = max(self.knownLastSequence, ack.sequence)
                    self.acknowledged()
                    self.consumer?.acknowledged(sequence: ack.sequence)
                    completion(.success(ack.sequence))
                case .failure(let error):
                    self.publishFailures += 1
                    if case .client(.timedOut) = error { self.unanswered() }
                    if case .client(.noResponders) = error { self.unanswered() }
                    completion(.failure(error))
                }
            }
        } catch {
            publishFailures += 1
            completion(.failure(.client(error)))
        }
    }

    /// Outside `NAME.>`: the stream must not store these (they are not state).
    var presenceSubject: String { "_vigil_presence.\(settings.name)" }

    func publishPresence(_ payload: [UInt8]) {
        try? client.publish(subject: presenceSubject, payload: payload)
    }

    /// Subscribes to the other nodes' watcher counts (kept across reconnections).
    func onPresence(_ handler: @escaping ([UInt8]) -> Void) {
        _ = try? client.subscribe(subject: presenceSubject) { message in handler(message.payload) }
    }

    /// A publish of an earlier held write went out again (same message id).
    func countRepublished() { republished += 1 }

    /// An acknowledgement (or a probe's answer): the stream has a leader this node reaches.
    private func acknowledged() {
        if stalledSinceMs != nil {
            logger.notice("cluster: the stream acknowledges again; writes are taken",
                          metadata: ["stalled_ms": "\(monotonicMilliseconds() - stalledSinceMs!)"])
        }
        stalledSinceMs = nil
    }

    /// A publish (or probe) got no answer within A, or no responders.
    private func unanswered() {
        guard stalledSinceMs == nil, connected else { return }
        stalledSinceMs = monotonicMilliseconds() - Int64(settings.ackTimeoutMs)
        nextProbeMs = 0
        logger.error("cluster: a publish was not acknowledged within cluster.ack_timeout_ms; writes are refused until the stream answers",
                     metadata: ["ack_timeout_ms": "\(settings.ackTimeoutMs)"])
    }

    /// While stalled: STREAM.INFO (timeout A) every 250 ms; an answer naming a leader ends it.
    private func probe(nowMs: Int64) {
        guard stalledSinceMs != nil, connected, !probing, nowMs >= nextProbeMs else { return }
        probing = true
        nextProbeMs = nowMs + 250
        do throws(NATSClientError) {
            try jetStream.streamInfo(settings.name, timeoutMs: Int64(settings.ackTimeoutMs)) { [weak self] result in
                guard let self else { return }
                self.probing = false
                if case .success(let info) = result, !info.leader.isEmpty || self.settings.replicas == 1 {
                    self.streamLeader = info.leader
                    self.acknowledged()
                }
            }
        } catch {
            probing = false
        }
    }

    func health(into w: inout JSONWriter) {
        w.field("connected", connected)
        w.field("writable", writable)
        if let refusal { w.field("refusal", refusal) }
        w.field("server", client.serverInfo?.serverName ?? "")
        w.field("stream_leader", streamLeader)
        w.key("consumer")
        w.beginObject()
        w.field("name", consumer?.name ?? "")
        w.field("server", consumer?.server ?? "")
        w.field("created", Int64(consumer?.consumersCreated ?? 0))
        w.endObject()
        w.field("unwritable_ms", unwritableMs)
        w.field("republished", Int64(republished))
        w.field("applied_seq", Int64(clamping: appliedSequence))
        w.field("last_seq", Int64(clamping: knownLastSequence))
        w.field("lag", Int64(clamping: lag))
        w.field("published", Int64(published))
        w.field("publish_failures", Int64(publishFailures))
        w.field("undecodable", Int64(undecodable))
        if !streamDiffers.isEmpty {
            w.key("stream_differs")
            w.beginArray()
            for difference in streamDiffers { difference.write(into: &w) }
            w.endArray()
        }
    }

    // MARK: connection and consumption

    private func clientChanged(_ state: NATSClientState, reason: String) {
        switch state {
        case .connected:
            logger.notice("cluster: connected to NATS", metadata: ["cluster": "\(settings.name)", "node": "\(settings.nodeID)",
                                                                   "server": "\(client.serverInfo?.serverName ?? "")"])
            stalledSinceMs = nil
            findStream()
        default:
            if streamReady {
                logger.error("cluster: NATS connection lost; writes are refused until it is back", metadata: ["reason": "\(reason)"])
            }
            streamReady = false
        }
    }

    /// STREAM.INFO (creating the stream when it is missing), then consumption from the
    /// sequence after the last one applied.
    private func findStream() {
        retryAtMs = nil
        do throws(NATSClientError) {
            // STREAM.INFO waits A, not request_timeout_ms: after a reconnection during the
            // stream's leader election it goes unanswered, and is asked again at once.
            try jetStream.ensureStream(settings.streamConfig, infoTimeoutMs: Int64(settings.ackTimeoutMs)) { [weak self] result in
                guard let self else { return }
                switch result {
                case .success(let info):
                    guard self.acceptSettings(of: info) else { return }
                    self.lastError = nil
                    self.streamReady = true
                    self.streamLeader = info.leader
                    self.catchUpTarget = max(self.catchUpTarget, info.lastSequence)
                    self.knownLastSequence = max(self.knownLastSequence, info.lastSequence)
                    if info.firstSequence > self.appliedSequence + 1 && info.lastSequence > self.appliedSequence {
                        // Retention passed this node's state: it cannot catch up from the stream
                        // alone. A snapshot of the cluster's brings it past the gap.
                        self.lastError = "the stream starts at \(info.firstSequence), after this node's state (\(self.appliedSequence))"
                        guard !self.awaitingSnapshot else { return }
                        self.awaitingSnapshot = true
                        self.logger.error("cluster: \(self.lastError!); fetching the cluster's newest snapshot")
                        self.needsSnapshot?(info.firstSequence, info.lastSequence)
                        return
                    }
                    if self.consumer == nil {
                        self.consumer = OrderedConsumer(jetStream: self.jetStream, stream: self.settings.name,
                                                        startAfter: self.appliedSequence,
                                                        heartbeatMs: Int64(self.settings.consumerHeartbeatMs), retryMs: 250,
                                                        createTimeoutMs: Int64(self.settings.ackTimeoutMs)) { [weak self] sequence, message in
                            self?.received(sequence, message)
                        }
                    }
                    self.logger.notice("cluster: stream ready", metadata: ["jetstream": "\(info.name)", "last": "\(info.lastSequence)",
                                                                         "applied": "\(self.appliedSequence)",
                                                                         "replicas": "\(info.replicas)"])
                case .failure(.client(.timedOut)):
                    self.failed(NATSClientError.timedOut.description, retryInMs: 0)
                case .failure(let error):
                    self.failed(error.description)
                }
            }
        } catch {
            failed(error.description)
        }
    }

    /// Compares the stream's settings with the config's: a difference that breaks the node (other
    /// subjects, retention, storage, a shorter de-duplication window) keeps it not writable with
    /// the difference as its refusal (false); the others are logged at error, each with the fix.
    private func acceptSettings(of info: JSStreamInfo) -> Bool {
        let differences = settings.streamConfig.differences(from: info)
        let breaking = differences.filter(\.breaksCorrectness)
        guard breaking.isEmpty else {
            failed("the stream differs from the config: " + breaking.map(\.description).joined(separator: "; ")
                   + " (vigild cluster check reports it; an update does not fix subjects, retention or storage)")
            retryAtMs = monotonicMilliseconds() + 10_000
            return false
        }
        streamDiffers = differences
        for difference in differences {
            logger.error("cluster: the stream's \(difference.key) is \(difference.stream), the config's \(difference.config); vigild cluster check --update-stream changes it to the config's (or change the config)",
                         metadata: ["jetstream": "\(info.name)", "replicas": "\(info.replicas)"])
        }
        return true
    }

    /// No usable snapshot was found: look at the stream again (and ask again) after a while.
    func snapshotUnavailable() {
        awaitingSnapshot = false
        retryAtMs = monotonicMilliseconds() + 10_000
    }

    /// The node restored a snapshot that holds the stream up to `sequence`: consumption goes on
    /// from the next one.
    func resume(after sequence: UInt64) {
        awaitingSnapshot = false
        lastError = nil
        appliedSequence = sequence
        knownLastSequence = max(knownLastSequence, sequence)
        consumer?.stop()
        consumer = nil
        findStream()
    }

    /// Unanswered (`retryInMs` 0: asked again at the next tick) or refused (after 1 s).
    private func failed(_ reason: String, retryInMs: Int64 = 1_000) {
        if lastError != reason || retryInMs > 0 {
            logger.error("cluster: the stream is not usable; retrying", metadata: ["reason": "\(reason)"])
        }
        lastError = reason
        streamReady = false
        retryAtMs = monotonicMilliseconds() + retryInMs
    }

    private func tick(nowMs: Int64) {
        if let last = lastTickMs, !writable { unwritableMs += nowMs - last }
        lastTickMs = nowMs
        if let retryAt = retryAtMs, nowMs >= retryAt, connected { findStream() }
        probe(nowMs: nowMs)
    }

    func metrics(_ sync: inout MetricsSync) {
        sync.gauge("vigil_cluster_writable", writable ? 1 : 0, help: "1 while this node takes writes (docs/CLUSTER.md).")
        sync.counter("vigil_cluster_unwritable_seconds_total", seconds: Double(unwritableMs) / 1000,
                     help: "Time this cluster node refused writes (not writable), summed.")
        for reason in ["heartbeat", "deleted", "no_progress", "gap"] {
            sync.counter("vigil_cluster_consumer_resets_total", labels: ["reason": reason], consumer?.resetsByReason[reason] ?? 0,
                         help: "Ordered consumers recreated, by why the last one was given up.")
        }
        sync.counter("vigil_cluster_republished_total", republished,
                     help: "Publishes of held writes sent again (same message id) after an unanswered attempt.")
    }

    private func received(_ sequence: UInt64, _ message: NATSMessage) {
        appliedSequence = sequence
        knownLastSequence = max(knownLastSequence, sequence)
        let base = message.headers?[Self.baseHeader].flatMap { UInt64($0) }
        var record: JournalRecord?
        var kept: KeptAnswer?
        let scan = JournalCodec.scan(message.payload)
        if scan.stop == nil, let decoded = Self.change(scan.records) {
            (record, kept) = decoded
        } else {
            undecodable += 1
            logger.error("cluster: a stream message is not one readable record; skipped (every node skips it alike)",
                         metadata: ["sequence": "\(sequence)", "bytes": "\(message.payload.count)"])
        }
        deliver(Entry(sequence: sequence, messageID: message.headers?[JSPubAck.messageIDHeader], base: base, record: record,
                      publisher: message.headers?[Self.publisherHeader], kept: kept))
    }

    /// A message's records: one change, optionally followed by the answer kept for it; nil for
    /// anything else (two changes, an answer alone or first).
    static func change(_ records: [JournalRecord]) -> (JournalRecord, KeptAnswer?)? {
        switch records.count {
        case 1:
            if case .answerKept = records[0] { return nil }
            return (records[0], nil)
        case 2:
            guard case .answerKept(let kept) = records[1] else { return nil }
            if case .answerKept = records[0] { return nil }
            return (records[0], kept)
        default:
            return nil
        }
    }
}
