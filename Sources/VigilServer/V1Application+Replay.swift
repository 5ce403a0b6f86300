import VigilCore
import VigilWire

/// `panic.watch` with `since`: the missed events, sent after the reply, whole and in order
/// (docs/PROTOCOL.md, "Watching"; the bookkeeping is `PanicReplays`).
///
/// A replay is read from the stream's history one event at a time and queued on the watcher's
/// connection as its own messages, untagged: conflation (`panic.conflate_above_bytes`) takes back
/// only a slow watcher's *live* locations, never what it asked for. The replay is paced instead:
/// it queues while the connection holds less than `replayWindowBytes`, then waits for the
/// connection's queue to drain (`Connection.notifyWhenDrained`) and goes on at the end of the
/// next turn. Memory per replaying watcher is therefore at most a window, whatever the history's
/// size, and a hundred contacts reconnecting at once share the loop turn by turn instead of one
/// of them holding it for its whole replay.
///
/// The replay cannot be delivered whole in two cases, and each is said, never silent: the history
/// moved past what the watcher is still owed (it read more slowly than the stream advanced by
/// `panic.history_events`), or the stream is gone (ended and its grace over). The watcher is then
/// closed with 1013 and a reason; it reconnects and watches again with `since`, and is answered
/// `gap` (the state is the truth) or `forbidden` (the stream is gone). A connection whose queue
/// passes its budget meanwhile is closed by its send policy (1013 too).
extension V1Application {
    /// Unsent bytes a watcher's connection may hold before its replay waits for it to drain:
    /// enough to keep a loopback or LAN socket busy between two turns, little enough that a
    /// hundred replays at once hold a few MiB.
    static let replayWindowBytes = 65_536

    /// Replay bytes all connections together may queue in one loop turn: with a hundred replays
    /// under way, a turn still takes a few milliseconds, so every other client's answer waits at
    /// most that long (benchmarks/replay_reconnect.py's probe); the rest go on next turn, in turn.
    static let replayTurnBytes = 262_144

    /// The close reason when a replay cannot be finished (at most 123 bytes, RFC 6455 §5.5).
    static let replayLostReason = "replay fell behind the stream's history: watch again with since"

    /// The `.replay` item that follows a watch's reply: the replay starts with its first window.
    func startReplay(_ fd: Int32, _ stream: StreamID, seqs: ClosedRange<UInt64>?) {
        replays.start(fd, stream, seqs: seqs)
        guard seqs != nil else { return }
        stats.replays += 1
        stepReplay(fd, stream)
    }

    /// A live event or notice of a stream, before it is sent: recipients with a replay of that
    /// stream in progress get the event from their replay instead, in order (`PanicReplays.deferLive`),
    /// and a revocation ends their replay.
    func deferToReplays(_ delivery: inout PanicDelivery) {
        switch delivery.kind {
        case .event(let event):
            var kept: [WatcherID]?
            for (i, fd) in delivery.recipients.enumerated() {
                if replays.deferLive(fd, delivery.stream, seq: event.seq) {
                    if kept == nil { kept = Array(delivery.recipients[..<i]) }
                } else {
                    kept?.append(fd)
                }
            }
            if let kept { delivery.recipients = kept }
        case .revoked:
            for fd in delivery.recipients { replays.remove(fd, delivery.stream) }
        case .stale, .watchers, .rekeyed:
            break  // not in the history: sent live (`panic.stale` carries its own times)
        }
    }

    /// The connection's queue drained while a replay of its waited: go on next turn.
    public func drained(_ connection: Connection) {
        replays.drained(connection.fd)
        server.loop.requestTurn()
    }

    /// The end-of-turn step after the fan-out: the replays whose connections drained go on, in
    /// the order they drained, until the turn's replay budget is spent.
    func continueReplays() {
        defer { replayBytesThisTurn = 0 }
        guard !replays.isEmpty else { return }
        for fd in replays.takeReady() {
            for stream in replays.streams(of: fd) { stepReplay(fd, stream) }
        }
    }

    /// Sends the replay's next events while the connection holds less than a window; then it
    /// waits for the drain, or is over.
    private func stepReplay(_ fd: Int32, _ id: StreamID) {
        guard let connection = server.connection(fd: fd) else {
            replays.remove(fd, id)
            return
        }
        guard let stream = panic.stream(id) else {
            cutReplay(fd, id, connection)
            return
        }
        guard panic.isWatching(id, watcher: fd) else {
            replays.remove(fd, id)  // unwatched (or revoked): it asked to stop
            return
        }
        while true {
            guard replayBytesThisTurn < Self.replayTurnBytes else {
                // This turn's share is spent: next turn, after those waiting already.
                replays.drained(fd)
                server.loop.requestTurn()
                return
            }
            switch replays.step(fd, id, queuedBytes: connection.queuedBytes, window: Self.replayWindowBytes) {
            case .done:
                replays.remove(fd, id)
                return
            case .wait:
                connection.notifyWhenDrained()
                return
            case .send(let seq):
                guard let event = stream.event(seq: seq) else {
                    cutReplay(fd, id, connection)
                    return
                }
                replyWriter.reset()
                ServerMessages.panicEvent(id, event, into: &replyWriter)
                replayBytesThisTurn += replyWriter.count
                let result = replyWriter.withUnsafeBytes { connection.send(.text, payload: $0, traffic: .panicNotice) }
                guard result == .queued else {
                    replays.remove(fd, id)  // not open, or closed by its send policy
                    return
                }
                replays.sent(fd, id, seq: seq)
                stats.replayedEvents += 1
                stats.deliveries += 1
            }
        }
    }

    /// What the watcher is owed is gone: it is told by a close, never left with less.
    private func cutReplay(_ fd: Int32, _ id: StreamID, _ connection: Connection) {
        replays.remove(fd, id)
        stats.replaysCut += 1
        connection.close(code: .tryAgainLater, reason: Self.replayLostReason)
    }
}
