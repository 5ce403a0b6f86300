import VigilCore
import VigilState

/// The `panic.*` operations of `/v1` (docs/PROTOCOL.md, "Panic-location streams").
extension V1Application {
    /// Applies a panic operation and replies; false when `operation` is not one.
    func applyPanic(_ operation: ClientOperation, ref: JSONValue?, connection c: Connection, now: Int64) -> Bool {
        let me = c.fd
        switch operation {
        case .panicStart(let status, let location, let note, let watchers):
            switch panic.start(owner: me, status: status, location: location, note: note, watchers: watchers, secrets: secrets, now: now, out: &panicDeliveries) {
            case .success(let started):
                persistence?.record(.panicStart(started.stream), critical: true)
                send(c) { w in
                    ServerMessages.ok(ref: ref, into: &w) { w in
                        w.key("stream"); w.string(started.stream.id.description)
                        w.key("seq"); w.int(Int64(started.stream.seq))
                        w.key("owner_token"); w.string(started.ownerToken)
                        w.key("watch_tokens")
                        w.beginArray()
                        for t in started.watchTokens { w.string(t) }
                        w.endArray()
                    }
                }
            case .failure(let f): reply(c, error: .from(f), ref: ref)
            }
        case .panicUpdate(let stream, let token, let location):
            guard let stream else { break }
            replySeq(c, ref: ref, journaled(stream, critical: false, panic.update(stream, by: me, ownerToken: token, location: location, secrets: secrets, now: now, out: &panicDeliveries)))
        case .panicStatus(let stream, let token, let status):
            guard let stream else { break }
            replySeq(c, ref: ref, journaled(stream, critical: true, panic.setStatus(stream, by: me, ownerToken: token, status: status, secrets: secrets, now: now, out: &panicDeliveries)))
        case .panicEnd(let stream, let token, let reason):
            guard let stream else { break }
            replySeq(c, ref: ref, journaled(stream, critical: true, panic.end(stream, by: me, ownerToken: token, reason: reason, secrets: secrets, now: now, out: &panicDeliveries)))
        case .panicResume(let stream, let token):
            guard let stream else { break }
            switch panic.resume(stream, by: me, ownerToken: token, secrets: secrets) {
            case .success(let s):
                send(c) { w in ServerMessages.ok(ref: ref, into: &w) { w in w.key("state"); ServerMessages.panicState(s, into: &w) } }
                // The owner learns at once how many contacts are watching.
                let count = panic.watcherCount(stream)
                send(c) { w in ServerMessages.panicDelivery(PanicDelivery(stream: stream, kind: .watchers(count: count), recipients: [me]), now: now, into: &w) }
            case .failure(let f): reply(c, error: .from(f), ref: ref)
            }
        case .panicWatch(let stream, let token, let since):
            guard let stream else { break }
            switch panic.watch(stream, watcher: me, watchToken: token, since: since, secrets: secrets, out: &panicDeliveries) {
            case .success(let (s, replay, gap)):
                send(c) { w in
                    ServerMessages.ok(ref: ref, into: &w) { w in
                        w.key("state"); ServerMessages.panicState(s, into: &w)
                        if gap { w.key("gap"); w.bool(true) }
                    }
                }
                // The missed events, in order, before any live one.
                for e in replay { send(c) { w in ServerMessages.panicEvent(stream, e, into: &w) } }
            case .failure(let f): reply(c, error: .from(f), ref: ref)
            }
        case .panicUnwatch(let stream):
            if let stream { panic.unwatch(stream, watcher: me, out: &panicDeliveries) }
            send(c) { w in ServerMessages.ok(ref: ref, into: &w) }
        case .panicInvite(let stream, let token):
            guard let stream else { break }
            switch panic.invite(stream, by: me, ownerToken: token, secrets: secrets) {
            case .success(let watchToken):
                persistence?.record(.panicInvite(stream, secrets.digest(ofToken: watchToken)), critical: true)
                send(c) { w in ServerMessages.ok(ref: ref, into: &w) { w in w.key("watch_token"); w.string(watchToken) } }
            case .failure(let f): reply(c, error: .from(f), ref: ref)
            }
        case .panicRevoke(let stream, let token, let watchToken):
            guard let stream else { break }
            switch panic.revoke(stream, by: me, ownerToken: token, watchToken: watchToken, secrets: secrets, out: &panicDeliveries) {
            case .success:
                persistence?.record(.panicRevoke(stream, secrets.digest(ofToken: watchToken)), critical: true)
                send(c) { w in ServerMessages.ok(ref: ref, into: &w) }
            case .failure(let f): reply(c, error: .from(f), ref: ref)
            }
        default:
            return false
        }
        return true
    }

    /// Journals the stream's newest event after a successful update, status change or end.
    private func journaled(_ stream: StreamID, critical: Bool, _ result: Result<UInt64, PanicFailure>) -> Result<UInt64, PanicFailure> {
        if case .success = result, let p = persistence, let s = panic.stream(stream), let record = JournalRecord.latestEvent(of: s) {
            p.record(record, critical: critical)
        }
        return result
    }

    private func replySeq(_ c: Connection, ref: JSONValue?, _ result: Result<UInt64, PanicFailure>) {
        switch result {
        case .success(let seq): send(c) { w in ServerMessages.ok(ref: ref, into: &w) { w in w.key("seq"); w.int(Int64(seq)) } }
        case .failure(let f): reply(c, error: .from(f), ref: ref)
        }
    }

    /// Encodes each panic delivery once and queues the same frame on every recipient.
    func fanOutPanic() {
        guard !panicDeliveries.isEmpty else { return }
        let now = Self.wallClockMs()
        for d in panicDeliveries {
            writer.reset()
            ServerMessages.panicDelivery(d, now: now, into: &writer)
            let frame = writer.bytes.withUnsafeBytes { SharedFrame.text($0) }
            for r in d.recipients { server.connection(fd: r)?.send(shared: frame) }
        }
        panicDeliveries.removeAll(keepingCapacity: true)
    }
}
