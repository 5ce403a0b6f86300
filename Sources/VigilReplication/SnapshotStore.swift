import VigilLoop
import VigilNATS

/// Where a cluster's snapshots go and how big they may be.
public struct SnapshotStoreSettings: Equatable, Sendable {
    /// The object store bucket: `<cluster name>_SNAPSHOTS` (stream `OBJ_<cluster name>_SNAPSHOTS`).
    public var bucket: String
    /// The one object every put replaces.
    public var objectName = "latest"
    /// Bytes per chunk message (ADR-20's default).
    public var chunkSize = JSObjectStore.defaultChunkSize
    /// Chunk publishes whose acknowledgement may be awaited at once: the put's flow control.
    /// At most `maxAcksOutstanding × chunkSize` bytes of a snapshot wait in the client's output,
    /// which is what other traffic on the connection waits behind: with 8 a put ran about 1.5
    /// times faster than with 2 and other traffic waited about 3 times longer (docs/CLUSTER.md).
    public var maxAcksOutstanding = 2
    /// The largest snapshot put accepts and getNewest downloads (`cluster.max_snapshot_bytes`).
    public var maxSnapshotBytes = 256 * 1_048_576
    /// Copies JetStream keeps of the bucket (`cluster.replicas`).
    public var replicas = 1
    /// Downloads tried, each from the meta, before `incomplete` is given up on.
    public var downloadAttempts = 3
    /// The bucket's bound (`discard: new`: a put that would pass it is refused, the current
    /// snapshot stays). Room for the current object, a new one being put, and one left over by a
    /// node that died in the middle of a put.
    public var bucketMaxBytes: Int64

    public init(replicationName: String, maxSnapshotBytes: Int = 256 * 1_048_576, replicas: Int = 1) {
        bucket = "\(replicationName)_SNAPSHOTS"
        self.maxSnapshotBytes = maxSnapshotBytes
        self.replicas = replicas
        bucketMaxBytes = 3 * Int64(maxSnapshotBytes) + 1_048_576
    }

    public var bucketConfig: JSObjectStoreConfig {
        JSObjectStoreConfig(bucket: bucket, description: "Vigil cluster snapshots", replicas: replicas, maxBytes: bucketMaxBytes)
    }

    /// Why these settings cannot work, nil when they can.
    public var problem: String? {
        if !JSObjectStore.isBucketName(bucket) { return "bucket name \(bucket.prefix(80)) is not 1 to 64 of A-Z a-z 0-9 _ -" }
        if objectName.isEmpty || objectName.utf8.count > JSObjectInfo.maxNameBytes { return "object name is empty or too long" }
        if chunkSize < 1_024 || chunkSize > 1_048_576 { return "chunk size \(chunkSize) is outside 1 KiB…1 MiB" }
        if maxAcksOutstanding < 1 || maxAcksOutstanding > 64 { return "acks outstanding \(maxAcksOutstanding) is outside 1…64" }
        if maxSnapshotBytes < 0 { return "negative maximum snapshot size" }
        if downloadAttempts < 1 || downloadAttempts > 10 { return "download attempts \(downloadAttempts) is outside 1…10" }
        if bucketMaxBytes != -1 && bucketMaxBytes < 2 * Int64(maxSnapshotBytes) { return "the bucket cannot hold two snapshots of the maximum size" }
        return nil
    }
}

/// A snapshot read back from the store.
public struct StoredSnapshot: Equatable, Sendable {
    public var metadata: SnapshotMetadata
    public var bytes: [UInt8]
    /// The object's meta as stored (size, chunks, digest, nuid).
    public var info: JSObjectInfo
    /// The meta message's stream sequence and stored time (RFC 3339, the server's clock).
    public var metaSequence: UInt64
    public var storedAt: String
}

/// What `getNewest` found.
public enum SnapshotLookup: Equatable, Sendable {
    /// No snapshot was ever published (no bucket, no object, or the object deleted).
    case none
    case snapshot(StoredSnapshot)
}

/// A completed put.
public struct PublishedSnapshot: Equatable, Sendable {
    public var info: JSObjectInfo
    /// The stream sequence of the new meta (the object is in place from then on).
    public var metaSequence: UInt64
    /// Chunk messages of earlier objects purged after it (0 on the first put).
    public var purgedMessages: UInt64
}

/// Why a snapshot could not be put or read.
public enum SnapshotStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A put (or a download) is already under way on this store: one at a time.
    case busy
    /// Above `maxSnapshotBytes`: refused before anything was sent or downloaded.
    case tooLarge(size: UInt64, max: Int)
    /// The settings or the metadata cannot be used (`SnapshotStoreSettings.problem`).
    case invalid(String)
    /// The store already holds a snapshot of a later cluster sequence (this one): nothing sent.
    case superseded(UInt64)
    /// The client refused or lost the operation (not connected, connection lost, timeout).
    case client(NATSClientError)
    /// JetStream answered with an error (e.g. the bucket is full, or not as Vigil creates it).
    case jetStream(JetStreamError)
    /// The stored meta or chunks are not a well-formed snapshot.
    case corrupt(String)
    /// The chunks do not hash to the meta's digest.
    case digestMismatch(expected: String, actual: String)
    /// Fewer chunks in the stream than the meta announces (replaced while being read).
    case incomplete(String)

    public var description: String {
        switch self {
        case .busy: return "snapshot store: another transfer is under way"
        case .tooLarge(let size, let max): return "snapshot store: \(size) bytes is above the maximum of \(max)"
        case .invalid(let why): return "snapshot store: \(why)"
        case .superseded(let sequence): return "snapshot store: the store already holds a snapshot at cluster sequence \(sequence)"
        case .client(let error): return "snapshot store: \(error.description)"
        case .jetStream(let error): return "snapshot store: \(error.description)"
        case .corrupt(let why): return "snapshot store: corrupt snapshot: \(why)"
        case .digestMismatch(let expected, let actual): return "snapshot store: digest mismatch: meta says \(expected), chunks hash to \(actual)"
        case .incomplete(let why): return "snapshot store: incomplete snapshot: \(why)"
        }
    }
}

/// A cluster's snapshots in a JetStream object store, on the NATS client's loop: a node puts
/// its snapshot there periodically; a node that starts without a usable local snapshot (new,
/// or with a next sequence the stream's retention has passed) gets the newest one, restores it,
/// and consumes the stream from `metadata.replicatedSequence + 1`.
///
/// The layout is ADR-20's (`JSObjectStore`), so `nats object ls|info|get <NAME>_SNAPSHOTS`
/// reads it. One object, `settings.objectName`, replaced by every put: the new chunks go under a
/// new random id, then the meta replaces the old one (rollup), and only then are the old chunks
/// purged, so a reader always finds either the old object whole or the new one whole.
///
/// Every call runs on the loop thread, and every completion runs exactly once, later, on it.
/// A call that throws sent nothing and never completes. One put and one download at a time.
///
/// Usage (the daemon, on its loop):
///
///     let store = SnapshotStore(jetStream: js, settings: SnapshotStoreSettings(clusterName: "VIGIL",
///                               maxSnapshotBytes: config.maxSnapshotBytes, replicas: config.replicas))
///     // every snapshot interval, when the client is connected and no put is running:
///     try store.put(snapshotBytes, metadata: SnapshotMetadata(replicatedSequence: applied, nodeID: id,
///                   formatVersion: SnapshotCodec.version, takenAtMs: now)) { result in … }
///     // at start, when the local snapshot is missing or older than the stream's first sequence:
///     try store.getNewest { result in
///         switch result {
///         case .success(.snapshot(let s)): restore(s.bytes); consume(after: s.metadata.replicatedSequence)
///         case .success(.none): consume(after: 0)       // no snapshot yet: the stream from sequence 1
///         case .failure(let error): retry later          // never start from a corrupt snapshot
///         }
///     }
///
/// The caller checks the snapshot against the stream (`JetStream.streamInfo`): `replicatedSequence + 1`
/// (or 1 with `.none`) not below the stream's first sequence, otherwise the history the node
/// needs is gone; `replicatedSequence` not above its last sequence, otherwise the snapshot is of
/// another history (a stream deleted and created again). In both cases the node must not start
/// (docs/CLUSTER.md, "Snapshots in JetStream").
public final class SnapshotStore {
    public let jetStream: JetStream
    public let settings: SnapshotStoreSettings
    private var client: NATSClient { jetStream.client }

    /// The bucket was found or created as configured (on this store's first operation).
    public private(set) var bucketReady = false
    public var isPutting: Bool { putState != nil }
    public var isGetting: Bool { getState != nil }
    /// Chunks of the running put acknowledged so far (progress, and a hook for tests).
    public var chunksAcknowledged: Int { putState?.chunksAcked ?? 0 }
    /// Chunks of the running download received so far.
    public var chunksReceived: Int { getState?.assembly?.chunksReceived ?? 0 }
    /// Downloads started again from the meta after an `incomplete` one (for metrics and tests).
    public private(set) var attemptsRetried = 0

    /// Objects this store wrote whose chunks are not known to be purged: a failed put's partial
    /// chunks, or a put that succeeded and was then replaced by another node's. None of them is
    /// the current object once the next put's meta is in place, so that put purges them all.
    private var ownObjects: [String] = []
    private static let maxOwnObjects = 64
    private var random = SystemRandomNumberGenerator()
    private var putState: PutState?
    private var getState: GetState?

    private final class PutState {
        let bytes: [UInt8]
        let metadata: SnapshotMetadata
        let nuid: String
        let completion: (Result<PublishedSnapshot, SnapshotStoreError>) -> Void
        let hasher = SHA256Stream()
        var previous: String?
        var nextOffset = 0
        var chunksSent = 0
        var chunksAcked = 0
        var acksOutstanding = 0
        var metaSent = false
        var retryOnTick = false
        var chunksStarted = false

        init(bytes: [UInt8], metadata: SnapshotMetadata, nuid: String,
             completion: @escaping (Result<PublishedSnapshot, SnapshotStoreError>) -> Void) {
            self.bytes = bytes
            self.metadata = metadata
            self.nuid = nuid
            self.completion = completion
        }
    }

    private final class GetState {
        let completion: (Result<SnapshotLookup, SnapshotStoreError>) -> Void
        let attemptsLeft: Int
        var assembly: JSObjectAssembly?
        var metadata: SnapshotMetadata?
        var metaSequence: UInt64 = 0
        var storedAt = ""
        let hasher = SHA256Stream()
        var chunkSubject = ""
        /// The stream sequence the next chunk is asked for from.
        var nextSequence: UInt64 = 1

        init(completion: @escaping (Result<SnapshotLookup, SnapshotStoreError>) -> Void, attemptsLeft: Int) {
            self.completion = completion
            self.attemptsLeft = attemptsLeft
        }
    }

    public init(jetStream: JetStream, settings: SnapshotStoreSettings) {
        self.jetStream = jetStream
        self.settings = settings
        jetStream.client.addTickHandler { [weak self] now in self?.tick(nowMs: now) }
    }

    private var streamName: String { JSObjectStore.streamName(bucket: settings.bucket) }
    private var metaSubject: String { JSObjectStore.metaSubject(bucket: settings.bucket, name: settings.objectName) }

    private func checkReady() throws(SnapshotStoreError) {
        if let problem = settings.problem { throw .invalid(problem) }
        guard client.state == .connected else { throw .client(.notConnected) }
    }

    // MARK: the bucket

    /// Finds the bucket's stream, or creates it with the object store's config; completes with its
    /// info. A stream of that name over other subjects, or without rollup headers or direct gets,
    /// is refused (`jetStream(.mismatch)`), never taken over or changed. Put calls it itself (once
    /// per store); getNewest needs no bucket (none is `.none`).
    public func ensureBucket(completion: @escaping (Result<JSStreamInfo, SnapshotStoreError>) -> Void) throws(SnapshotStoreError) {
        try checkReady()
        ensureBucket(creating: true, completion)
    }

    private func ensureBucket(creating: Bool, _ completion: @escaping (Result<JSStreamInfo, SnapshotStoreError>) -> Void) {
        let config = settings.bucketConfig
        do throws(NATSClientError) {
            try client.request(subject: JSAPI.streamInfo(config.streamName), payload: [], timeoutMs: jetStream.timeoutMs) { [weak self] reply in
                guard let self else { return completion(.failure(.client(.closed))) }
                switch JetStream.decode(reply, JSStreamInfo.decode) {
                case .success(let info):
                    if case .success(let message) = reply, let problem = config.problem(existing: message.payload) {
                        return completion(.failure(.jetStream(.mismatch(problem))))
                    }
                    self.bucketReady = true
                    completion(.success(info))
                case .failure(.api(let error)) where error.errorCode == JSAPI.streamNotFound && creating:
                    self.createBucket(config, completion)
                case .failure(let error):
                    completion(.failure(.jetStream(error)))
                }
            }
        } catch {
            completion(.failure(.client(error)))
        }
    }

    private func createBucket(_ config: JSObjectStoreConfig, _ completion: @escaping (Result<JSStreamInfo, SnapshotStoreError>) -> Void) {
        do throws(NATSClientError) {
            try client.request(subject: JSAPI.streamCreate(config.streamName), payload: config.encode(),
                               timeoutMs: jetStream.timeoutMs) { [weak self] reply in
                guard let self else { return completion(.failure(.client(.closed))) }
                switch JetStream.decode(reply, JSStreamInfo.decode) {
                case .success(let info):
                    self.bucketReady = true
                    completion(.success(info))
                case .failure(.api(let error)) where error.errorCode == JSAPI.streamNameInUse:
                    // Another node created it in between: look at what it made.
                    self.ensureBucket(creating: false, completion)
                case .failure(let error):
                    completion(.failure(.jetStream(error)))
                }
            }
        } catch {
            completion(.failure(.client(error)))
        }
    }

    private func withBucket(_ then: @escaping (SnapshotStoreError?) -> Void) {
        if bucketReady { return then(nil) }
        ensureBucket(creating: true) { result in
            switch result {
            case .success: then(nil)
            case .failure(let error): then(error)
            }
        }
    }

    // MARK: the meta

    /// The current meta of the object (nil: no bucket, no object), with its stream sequence and time.
    private func readMeta(_ completion: @escaping (Result<(JSObjectInfo, JSStoredMessage)?, SnapshotStoreError>) -> Void) {
        do throws(NATSClientError) {
            try client.request(subject: JSAPI.streamMessageGet(streamName), payload: JSStoredMessage.lastBySubjectRequest(metaSubject),
                               timeoutMs: jetStream.timeoutMs) { reply in
                switch JetStream.decode(reply, JSStoredMessage.decode) {
                case .success(let message):
                    switch JSObjectInfo.decode(message.data) {
                    case .success(let info): completion(.success((info, message)))
                    case .failure(let error): completion(.failure(.corrupt(error.description)))
                    }
                case .failure(.api(let error)) where error.errorCode == JSAPI.noMessageFound || error.errorCode == JSAPI.streamNotFound:
                    completion(.success(nil))
                case .failure(let error):
                    completion(.failure(.jetStream(error)))
                }
            }
        } catch {
            completion(.failure(.client(error)))
        }
    }

    // MARK: put

    /// Publishes `bytes` as the newest snapshot with `metadata`, replacing the previous one, and
    /// completes with the new object's meta once it is in place and the replaced chunks are
    /// purged. The chunks go out `settings.chunkSize` at a time, each acknowledged by JetStream,
    /// at most `settings.maxAcksOutstanding` awaited at once, hashed as they go; the meta (size,
    /// chunk count, SHA-256, metadata) follows the last acknowledgement. A failure at any step
    /// completes with it and leaves the previous snapshot current; the partial chunks are purged
    /// at once if possible, otherwise by the next put. A put whose `replicatedSequence` is below the
    /// current snapshot's completes with `superseded` before sending anything (an equal one
    /// replaces it).
    ///
    /// Throws (nothing sent, no completion) when a put is already running (`busy`), the client
    /// is not connected, `bytes` is above `maxSnapshotBytes` (`tooLarge`), or the settings or the
    /// node id are unusable (`invalid`). `bytes` is shared, not copied: do not mutate it meanwhile
    /// (an array's copy-on-write makes that safe anyway).
    public func put(_ bytes: [UInt8], metadata: SnapshotMetadata,
                    completion: @escaping (Result<PublishedSnapshot, SnapshotStoreError>) -> Void) throws(SnapshotStoreError) {
        guard putState == nil else { throw .busy }
        try checkReady()
        guard bytes.count <= settings.maxSnapshotBytes else { throw .tooLarge(size: UInt64(bytes.count), max: settings.maxSnapshotBytes) }
        guard !metadata.nodeID.isEmpty, metadata.nodeID.utf8.count <= SnapshotMetadata.maxNodeIDBytes,
              NATSHeaders(fields: [(name: "x", value: metadata.nodeID)]).isEncodable else {
            throw .invalid("node id must be 1 to \(SnapshotMetadata.maxNodeIDBytes) printable bytes")
        }
        let state = PutState(bytes: bytes, metadata: metadata,
                             nuid: JSObjectStore.makeNUID(using: &random), completion: completion)
        putState = state
        withBucket { [weak self] error in
            guard let self, self.putState === state else { return }
            if let error { return self.finishPut(state, .failure(error)) }
            self.readMeta { [weak self] result in
                guard let self, self.putState === state else { return }
                switch result {
                case .success(let current):
                    // Never replace a snapshot with an older one (a node that lags behind, or
                    // raced another node's put and lost).
                    if let info = current?.0, !info.deleted, let newer = SnapshotMetadata(entries: info.metadata),
                       newer.replicatedSequence > state.metadata.replicatedSequence {
                        return self.finishPut(state, .failure(.superseded(newer.replicatedSequence)))
                    }
                    state.previous = current?.0.nuid
                case .failure(.corrupt):
                    state.previous = nil  // a corrupt meta is replaced; its chunks (unknown) stay
                case .failure(let error):
                    return self.finishPut(state, .failure(error))
                }
                state.chunksStarted = true
                self.pump(state)
            }
        }
    }

    /// Sends chunks while fewer than `maxAcksOutstanding` await their acknowledgement.
    private func pump(_ state: PutState) {
        let subject = JSObjectStore.chunkSubject(bucket: settings.bucket, nuid: state.nuid)
        state.retryOnTick = false
        while state.acksOutstanding < settings.maxAcksOutstanding && state.nextOffset < state.bytes.count {
            let end = min(state.nextOffset + settings.chunkSize, state.bytes.count)
            let chunk = state.bytes[state.nextOffset..<end]
            do throws(NATSClientError) {
                try client.request(subject: subject, payload: chunk, timeoutMs: jetStream.timeoutMs) { [weak self] reply in
                    self?.chunkAcknowledged(state, reply)
                }
            } catch .outboundFull {
                // Other traffic fills the client's output: try again on the next ack or tick.
                if state.acksOutstanding == 0 { state.retryOnTick = true }
                return
            } catch {
                return finishPut(state, .failure(.client(error)))
            }
            state.hasher.update(chunk)
            state.nextOffset = end
            state.chunksSent += 1
            state.acksOutstanding += 1
        }
        if state.nextOffset == state.bytes.count && state.acksOutstanding == 0 && !state.metaSent { sendMeta(state) }
    }

    private func chunkAcknowledged(_ state: PutState, _ reply: Result<NATSMessage, NATSClientError>) {
        guard putState === state else { return }
        switch JetStream.decode(reply, JSPubAck.decode) {
        case .success(let ack) where ack.stream == streamName:
            state.acksOutstanding -= 1
            state.chunksAcked += 1
            pump(state)
        case .success(let ack):
            finishPut(state, .failure(.jetStream(.mismatch("chunk stored in stream \(ack.stream), not \(streamName)"))))
        case .failure(let error):
            finishPut(state, .failure(error.asSnapshotError))
        }
    }

    private func sendMeta(_ state: PutState) {
        var info = JSObjectInfo(name: settings.objectName, bucket: settings.bucket, nuid: state.nuid,
                                size: UInt64(state.bytes.count), chunks: state.chunksSent,
                                digest: JSObjectDigest.format(sha256: state.hasher.finish()),
                                metadata: state.metadata.entries, maxChunkSize: settings.chunkSize)
        info.description = "Vigil snapshot"
        let headers = NATSHeaders(fields: [JSObjectStore.rollupHeader])
        state.metaSent = true
        do throws(NATSClientError) {
            try client.request(subject: metaSubject, headers: headers, payload: info.encode(), timeoutMs: jetStream.timeoutMs) { [weak self] reply in
                guard let self, self.putState === state else { return }
                switch JetStream.decode(reply, JSPubAck.decode) {
                case .success(let ack):
                    self.purgeReplaced(state, info: info, metaSequence: ack.sequence)
                case .failure(let error):
                    self.finishPut(state, .failure(error.asSnapshotError))
                }
            }
        } catch {
            finishPut(state, .failure(.client(error)))
        }
    }

    /// The new meta is in place: every earlier object of this name is garbage. Purges them one
    /// after another; one that fails stays listed for the next put (the put itself succeeded).
    private func purgeReplaced(_ state: PutState, info: JSObjectInfo, metaSequence: UInt64) {
        var garbage = ownObjects.filter { $0 != state.nuid }
        if let previous = state.previous, previous != state.nuid, !garbage.contains(previous) { garbage.append(previous) }
        ownObjects = [state.nuid]
        var purged: UInt64 = 0
        func next() {
            guard let nuid = garbage.popLast() else {
                return finishPut(state, .success(PublishedSnapshot(info: info, metaSequence: metaSequence, purgedMessages: purged)))
            }
            purgeChunks(of: nuid) { count in
                purged += count ?? 0
                next()
            }
        }
        next()
    }

    /// Purges an object's chunks; `done` gets the count, or nil when the purge failed (the object
    /// is then kept in `ownObjects` for the next put).
    private func purgeChunks(of nuid: String, done: @escaping (UInt64?) -> Void) {
        let subject = JSObjectStore.chunkSubject(bucket: settings.bucket, nuid: nuid)
        do throws(NATSClientError) {
            try client.request(subject: JSAPI.streamPurge(streamName), payload: JSPurge.request(filter: subject),
                               timeoutMs: jetStream.timeoutMs) { [weak self] reply in
                if case .success(let count) = JetStream.decode(reply, JSPurge.decodePurged) {
                    self?.ownObjects.removeAll { $0 == nuid }
                    done(count)
                } else {
                    self?.remember(nuid)
                    done(nil)
                }
            }
        } catch {
            remember(nuid)
            done(nil)
        }
    }

    private func remember(_ nuid: String) {
        guard !ownObjects.contains(nuid) else { return }
        ownObjects.append(nuid)
        if ownObjects.count > Self.maxOwnObjects { ownObjects.removeFirst() }
    }

    private func finishPut(_ state: PutState, _ result: Result<PublishedSnapshot, SnapshotStoreError>) {
        guard putState === state else { return }
        putState = nil
        if case .failure = result, state.chunksStarted {
            remember(state.nuid)
            // Without its meta the partial object can never become current: purge it now if the
            // connection allows (otherwise the next put does). With the meta sent, its outcome is
            // unknown (it may be the current object): only a later put may purge it.
            if !state.metaSent && state.chunksSent > 0 && client.state == .connected {
                purgeChunks(of: state.nuid) { _ in }
            }
        }
        state.completion(result)
    }

    // MARK: getNewest

    /// Downloads the newest snapshot: its meta (`STREAM.MSG.GET`, last on the meta subject), then
    /// its chunks in stream order by direct gets (`JSDirectGet`, next on the object's chunk subject
    /// after the last one read, one request in flight, so the download never queues more than one
    /// chunk ahead of the connection's other traffic), reassembled into one buffer of the meta's
    /// size and hashed as they arrive, to the end of the chunk subject. Completes with `.none` when
    /// there is no bucket or no object, with the snapshot when the chunks add up to the meta's
    /// size and hash to its digest, and otherwise with a clear error: `tooLarge` (the meta's size
    /// is above `maxSnapshotBytes`; nothing downloaded), `corrupt`, `digestMismatch`,
    /// `incomplete` (fewer chunks than announced, `settings.downloadAttempts` times in a row: the
    /// object was replaced while being read, or a replica lagged; each attempt starts again from
    /// the meta), `client(.timedOut)` (a request unanswered within the JetStream timeout),
    /// `client(.connectionLost)`.
    ///
    /// Throws (no completion) when a download is already running or the client is not connected.
    public func getNewest(completion: @escaping (Result<SnapshotLookup, SnapshotStoreError>) -> Void) throws(SnapshotStoreError) {
        guard getState == nil else { throw .busy }
        try checkReady()
        startGet(GetState(completion: completion, attemptsLeft: settings.downloadAttempts))
    }

    private func startGet(_ state: GetState) {
        getState = state
        readMeta { [weak self] result in
            guard let self, self.getState === state else { return }
            switch result {
            case .failure(let error):
                self.finishGet(state, .failure(error))
            case .success(nil):
                self.finishGet(state, .success(.none))
            case .success(let (info, message)?):
                self.download(state, info: info, message: message)
            }
        }
    }

    private func download(_ state: GetState, info: JSObjectInfo, message: JSStoredMessage) {
        if info.deleted { return finishGet(state, .success(.none)) }
        guard info.name == settings.objectName, info.bucket == settings.bucket else {
            return finishGet(state, .failure(.corrupt("meta names object \(info.name.prefix(64)) of bucket \(info.bucket)")))
        }
        guard info.size <= UInt64(settings.maxSnapshotBytes) else {
            return finishGet(state, .failure(.tooLarge(size: info.size, max: settings.maxSnapshotBytes)))
        }
        guard let metadata = SnapshotMetadata(entries: info.metadata) else {
            return finishGet(state, .failure(.corrupt("meta without a Vigil snapshot's metadata")))
        }
        state.metadata = metadata
        state.metaSequence = message.sequence
        state.storedAt = message.time
        let maxChunk = info.maxChunkSize > 0 ? min(info.maxChunkSize, client.settings.payloadCap) : client.settings.payloadCap
        state.assembly = JSObjectAssembly(info: info, maxChunkBytes: maxChunk)
        state.chunkSubject = JSObjectStore.chunkSubject(bucket: settings.bucket, nuid: info.nuid)
        if info.chunks == 0 { return verify(state) }
        requestChunk(state)
    }

    /// Asks for the first chunk at or after `state.nextSequence` (one request in flight at a time).
    private func requestChunk(_ state: GetState) {
        do throws(NATSClientError) {
            try client.request(subject: JSAPI.directGet(streamName),
                               payload: JSDirectGet.request(nextBySubject: state.chunkSubject, from: state.nextSequence),
                               timeoutMs: jetStream.timeoutMs) { [weak self] reply in
                self?.received(state, reply)
            }
        } catch {
            finishGet(state, .failure(.client(error)))
        }
    }

    private func received(_ state: GetState, _ reply: Result<NATSMessage, NATSClientError>) {
        guard getState === state, state.assembly != nil else { return }
        let decoded: Result<JSDirectGet.Reply, JetStreamError>
        switch reply {
        case .success(let message): decoded = JSDirectGet.decode(message).mapError { .api($0) }
        case .failure(let error): decoded = .failure(.client(error))
        }
        switch decoded {
        case .failure(let error):
            finishGet(state, .failure(error.asSnapshotError))
        case .success(.notFound):
            switch state.assembly!.finish() {
            case .complete: verify(state)
            case .incomplete(let why): finishGet(state, .failure(.incomplete(why)))
            case .more, .corrupt(_): finishGet(state, .failure(.corrupt("unexpected end")))
            }
        case .success(.message(let subject, let sequence, let data)):
            guard subject == state.chunkSubject, sequence >= state.nextSequence else {
                return finishGet(state, .failure(.corrupt("direct get answered sequence \(sequence) on another subject or out of order")))
            }
            state.nextSequence = sequence + 1
            switch state.assembly!.add(data) {
            case .corrupt(let why):
                finishGet(state, .failure(.corrupt(why)))
            default:
                state.hasher.update(data)
                requestChunk(state)
            }
        }
    }

    private func verify(_ state: GetState) {
        guard var assembly = state.assembly, let metadata = state.metadata else { return }
        let actual = JSObjectDigest.format(sha256: state.hasher.finish())
        guard let expected = JSObjectDigest.parse(assembly.info.digest), JSObjectDigest.format(sha256: expected) == actual else {
            return finishGet(state, .failure(.digestMismatch(expected: assembly.info.digest, actual: actual)))
        }
        let bytes = assembly.takeBytes()
        state.assembly = nil
        finishGet(state, .success(.snapshot(StoredSnapshot(metadata: metadata, bytes: bytes, info: assembly.info,
                                                           metaSequence: state.metaSequence, storedAt: state.storedAt))))
    }

    private func finishGet(_ state: GetState, _ result: Result<SnapshotLookup, SnapshotStoreError>) {
        guard getState === state else { return }
        getState = nil
        state.assembly = nil
        if case .failure(.incomplete) = result, state.attemptsLeft > 1 {
            attemptsRetried += 1
            return startGet(GetState(completion: state.completion, attemptsLeft: state.attemptsLeft - 1))
        }
        state.completion(result)
    }

    // MARK: the clock

    private func tick(nowMs: Int64) {
        // Disconnected meanwhile: the pump's publish is refused, which ends the put.
        if let state = putState, state.retryOnTick { pump(state) }
    }
}

extension JetStreamError {
    /// A client failure stays a client failure; JetStream's answers stay JetStream's.
    var asSnapshotError: SnapshotStoreError {
        if case .client(let error) = self { return .client(error) }
        return .jetStream(self)
    }
}

extension JSAPI {
    /// Error code of `stream name already in use` (another node created it first).
    static let streamNameInUse = 10058
}

extension NATSHeaders {
    /// Whether the block encodes (its names are tokens, its values printable).
    var isEncodable: Bool {
        var scratch: [UInt8] = []
        return (try? encode(into: &scratch)) != nil
    }
}
