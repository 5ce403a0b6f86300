import VigilBytes
import VigilCore
import VigilWire

/// The end-of-turn fan-out of `/v1`.
extension V1Application {
    /// Sends everything in the outbox: each reply to its client, each event to all its recipients.
    ///
    /// It swaps the outbox's list out and walks it; anything appended meanwhile (a consumer
    /// dropped by its send policy runs `closed`, whose watcher counts are new deliveries) forms the
    /// next batch, walked by the same loop: the step never nests.
    ///
    /// May not re-enter: nothing it calls may call `fanOut`. Sends only queue bytes; a connection
    /// that closes during the walk only appends to the outbox (`WebSocketApplication.closed`).
    /// The precondition below enforces it.
    func fanOut() {
        precondition(!fanningOut, "the fan-out may not re-enter itself")
        fanningOut = true
        defer {
            fanningOut = false
            stateCache = nil  // a turn's: the next turn's changes come before its fan-out
        }
        while !outbox.isEmpty {
            var batch = outbox.takeBatch()
            for item in batch { send(item) }
            outbox.recycle(&batch)
        }
    }

    private func send(_ item: Outbox.Item) {
        switch item {
        case .welcome(let fd, let session):
            guard let connection = server.connection(fd: fd) else { return }
            replyWriter.reset()
            ServerMessages.welcome(session: session, settings: hub.settings, limits: limits, into: &replyWriter)
            replyWriter.withUnsafeBytes { _ = connection.send(.text, payload: $0, traffic: .reply) }
        case .reply(let fd, let ref, let reply):
            if case .error(let error) = reply { stats.errors[error.code, default: 0] += 1 }
            guard let connection = server.connection(fd: fd) else { return }
            replyWriter.reset()
            if case .panicState(let stream, let gap, let box) = reply {
                let state = encodedState(stream)
                ServerMessages.stateReplyPrefix(ref: ref, into: &replyWriter)
                let suffix = ServerMessages.stateReplySuffix(gap: gap, box: box)
                replyWriter.withUnsafeBytes { prefix in
                    suffix.withUnsafeBytes { _ = connection.send(prefix: prefix, shared: state, suffix: $0, traffic: .reply) }
                }
                return
            }
            ServerMessages.reply(reply, ref: ref, maxBytes: maxReplyBytes, into: &replyWriter)
            replyWriter.withUnsafeBytes { _ = connection.send(.text, payload: $0, traffic: .reply) }
        case .pins(let delivery):
            ServerMessages.pinEvent(delivery.kind, delivery.pin, into: &eventWriter)
            var frames = EventFrames(&eventWriter)
            var sent = 0
            let compression = server.compression
            // `plain` as a local constant: lent to each uncompressed recipient's send without a
            // retain (read out of `frames`, a variable, it was retained and released per recipient).
            let plain = frames.plain
            // The budget, once for the event: exact when the walk cannot change it (almost always),
            // else what every recipient has at least (`FanOutBudget`). Untagged: never `.conflated`.
            let most = delivery.recipients.count * (plain.count + Connection.maxCloseFrameBytes)
            let budget = server.policies.fanOutBudget(.mapEvent, totalQueued: server.loop.queuedBytes, growingBy: most)
            server.connections.walk(delivery.recipients) { connection in
                let slot = connection.compressionSlot
                let result = slot == 0 ? connection.send(shared: plain, traffic: .mapEvent, budget: budget)
                    : connection.send(shared: frames.frame(for: slot, compression), traffic: .mapEvent, budget: budget)
                if result == .queued { sent += 1 }
            }
            delivered(sent)
        case .panic(var delivery):
            if let replication, case .watchers(let count) = delivery.kind {
                // Watchers on the other nodes of a cluster count too (`WatcherPresence`).
                delivery.kind = .watchers(count: count + replication.remoteWatchers(delivery.stream))
            }
            ServerMessages.panicDelivery(delivery, now: Self.wallClockMs(), into: &eventWriter)
            var frames = EventFrames(&eventWriter)
            if !replays.isEmpty { deferToReplays(&delivery) }
            if delivery.recipients.isEmpty { return }
            // A location supersedes the stream's earlier unsent ones for a slow watcher; any other
            // news of the stream is never taken back.
            let (traffic, tag): (TrafficClass, UInt64)
            if case .event(let event) = delivery.kind, event.kind.isLocation {
                (traffic, tag) = (.panicLocation, Self.conflationTag(delivery.stream))
            } else {
                (traffic, tag) = (.panicNotice, 0)
            }
            var sent = 0
            let compression = server.compression
            let plain = frames.plain  // lent without a retain per recipient (see `.pins`)
            server.connections.walk(delivery.recipients) { connection in
                let slot = connection.compressionSlot
                let result = slot == 0 ? connection.send(shared: plain, traffic: traffic, tag: tag)
                    : connection.send(shared: frames.frame(for: slot, compression), traffic: traffic, tag: tag)
                if result == .queued || result == .conflated { sent += 1 }
            }
            delivered(sent)
        case .checkin(let delivery):
            ServerMessages.checkinDelivery(delivery, now: Self.wallClockMs(), into: &eventWriter)
            var frames = EventFrames(&eventWriter)
            var sent = 0
            for fd in delivery.recipients {
                guard let connection = server.connection(fd: fd) else { continue }
                let result = connection.send(shared: frames.frame(for: connection.compressionSlot, server.compression), traffic: .panicNotice)
                if result == .queued || result == .conflated { sent += 1 }
            }
            delivered(sent)
        case .close(let fd, let code, let reason):
            server.connection(fd: fd)?.close(code: code, reason: reason)
        case .replay(let fd, let stream, let seqs):
            startReplay(fd, stream, seqs: seqs)
        }
    }

    /// A stream's `state` JSON, encoded once per turn for every reply that shows the same state:
    /// a hundred contacts watching again at once cost one encoding of the trail (up to 1 MiB,
    /// ~10 ms), not a hundred, and the loop is not held that long meanwhile; uncompressed, the
    /// replies queue these bytes by reference (`Connection.send(prefix:shared:suffix:)`). The cache holds the
    /// turn's last stream only (the common case is one stream's contact group) and is dropped at
    /// the end of the fan-out, so a stale state can never be shown.
    func encodedState(_ stream: PanicStream) -> ByteChunk {
        if let cached = stateCache, cached.stream.hasTheSameState(as: stream) { return cached.json }
        var w = JSONWriter(capacity: 1024)
        // Room for the reply around it (type, ref, gap): a ref is a client's short id.
        ServerMessages.panicState(stream, maxBytes: maxReplyBytes - 256, into: &w)
        let json = w.withUnsafeBytes { ByteChunk(copying: $0) }
        stateCache = (stream, json)
        return json
    }

    /// Counts one event's deliveries (once per event, not per recipient: the hot loop stays plain).
    private func delivered(_ sent: Int) {
        server.counters.framesOut += sent
        stats.deliveries += sent
        stats.events += 1
        server.metrics.recordFanOut(sent)
    }

    /// A stream's tag in output queues (never 0, which means "untagged").
    static func conflationTag(_ stream: StreamID) -> UInt64 {
        let tag = stream.high ^ stream.low.byteSwapped
        return tag == 0 ? 1 : tag
    }
}

/// One event's frames: the uncompressed one, and a compressed one per deflater setting in use,
/// made the first time a recipient with that setting comes up (so an event is compressed once per
/// setting, never once per subscriber, and not at all when nobody compresses).
///
/// The uncompressed frame is taken from the event writer's arena (`JSONWriter(arenaCapacity:)`):
/// right after the turn's previous event, so a recipient's consecutive events are one output
/// queue entry. Compressed frames are chunks of their own. Public for `vigil-bench`, whose
/// fan-out takes the same path.
public struct EventFrames {
    public let plain: ChunkSlice
    /// The plain frame's header bytes (its payload follows them).
    private let headerSize: Int
    private var compressed: [ByteChunk?] = []
    private var tried: UInt64 = 0  // bit s: slot s was tried (slots beyond 63 are tried every time)

    /// Frames the text `writer` holds as an uncompressed text frame, taking it from the writer.
    public init(_ writer: inout JSONWriter) {
        let payload = writer.count
        headerSize = FrameEncoder.headerSize(payloadCount: payload, masked: false)
        plain = writer.takeFrame(headerSize: headerSize)
        _ = FrameEncoder.writeHeader(into: plain.chunk.base + plain.start, opcode: .text, fin: true, rsv1: false,
                                     payloadCount: payload, maskKey: nil)
    }

    /// The frame for a recipient with deflater setting `slot`.
    @inline(__always)
    mutating func frame(for slot: UInt8, _ compression: Compression) -> ChunkSlice {
        slot == 0 ? plain : compressedFrame(for: slot, compression)
    }

    private mutating func compressedFrame(for slot: UInt8, _ compression: Compression) -> ChunkSlice {
        let index = Int(slot)
        if index < 64, tried & (1 << UInt64(index)) != 0 { return compressed[index].map(ChunkSlice.init) ?? plain }
        let payload = UnsafeRawBufferPointer(start: plain.chunk.base + plain.start + headerSize, count: plain.count - headerSize)
        let frame = compression.compressedFrame(payload: payload, slot: slot)
        if index < 64 {
            if compressed.count <= index { compressed.append(contentsOf: repeatElement(nil, count: index + 1 - compressed.count)) }
            compressed[index] = frame
            tried |= 1 << UInt64(index)
        }
        return frame.map(ChunkSlice.init) ?? plain
    }
}
