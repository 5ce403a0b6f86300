/// The panic-stream messages of docs/PROTOCOL.md.
extension ServerMessages {
    static func location(_ l: PanicLocation, into w: inout JSONWriter) {
        w.key("lat"); w.double(l.lat)
        w.key("lon"); w.double(l.lon)
        if let a = l.accuracyM { w.key("accuracy_m"); w.double(a) }
        if let h = l.heading { w.key("heading"); w.double(h) }
        if let s = l.speedMps { w.key("speed_mps"); w.double(s) }
    }

    /// `panic.location`, `panic.status` (also for a missed check-in), `panic.ended` or `panic.timer`.
    public static func panicEvent(_ stream: StreamID, _ e: PanicEvent, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type")
        switch e.kind {
        case .location, .sealedLocation: w.string("panic.location")
        case .status, .missedCheckIn: w.string("panic.status")
        case .ended: w.string("panic.ended")
        case .timer: w.string("panic.timer")
        }
        w.key("stream"); w.string(stream.description)
        w.key("seq"); w.int(Int64(e.seq))
        switch e.kind {
        case .location(let l): location(l, into: &w)
        case .sealedLocation(let p): sealedPoint(p, into: &w)
        case .status(let s): w.key("status"); w.string(s.rawValue)
        case .ended(let r): w.key("reason"); w.string(r.rawValue)
        case .timer(let due):
            w.key("due_at")
            if let due { w.int(due) } else { w.null() }
        case .missedCheckIn(let due, let last, _):
            w.key("status"); w.string(PanicStatus.red.rawValue)
            w.key("reason"); w.string(missedCheckInReason)
            w.key("due_at"); w.int(due)
            lastPosition(last, into: &w)
        }
        w.key("at"); w.int(e.at)
        // After `at`, whose meaning it leaves as it was: when the alarm went out (at or after `at`).
        if case .missedCheckIn(_, _, let sentAt) = e.kind { w.key("sent_at"); w.int(sentAt) }
        w.endObject()
    }

    /// The `reason` of a status event the server made because a safety timer passed.
    public static let missedCheckInReason = "missed_check_in"

    /// The bytes of a `panic.watch` or `panic.resume` reply before its `state`: the server encodes
    /// a stream's state once for all the replies of a turn that show it (a contact group watching
    /// again at once) and sends each reply as this prefix, those shared bytes and
    /// `stateReplySuffix`, which together are what `reply(.panicState…)` writes.
    public static func stateReplyPrefix(ref: JSONValue?, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type"); w.string("ok")
        if let ref { w.key("ref"); w.value(ref) }
        w.key("state")
    }

    /// The bytes after the `state` (`stateReplyPrefix`).
    /// `box`: a circle member's own key box (an e2e stream), written before `gap`.
    public static func stateReplySuffix(gap: Bool, box: SealedBytes? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        if let box { bytes += Array(#","box":""#.utf8) + Array(box.text.utf8) + [UInt8(ascii: "\"")] }
        bytes += gap ? Array(#","gap":true}"#.utf8) : [UInt8(ascii: "}")]
        return bytes
    }

    /// `"last":{…}`: a clear position's coordinates and time, or an e2e stream's sealed point
    /// with its seq and time followed by `"position_known":false` (`sealedLast`).
    static func lastPosition(_ last: LastLocation, into w: inout JSONWriter) {
        switch last.position {
        case .clear(let l):
            w.key("last")
            w.beginObject()
            location(l, into: &w)
            w.key("at"); w.int(last.at)
            w.endObject()
        case .sealed(let p, let seq):
            sealedLast(p, seq: seq, at: last.at, into: &w)
        }
    }

    /// One point of a state's `trail` (a location event, clear or sealed; other events are not points).
    private static func trailPoint(_ e: PanicEvent, into w: inout JSONWriter) {
        guard e.kind.isLocation else { return }
        w.beginObject()
        w.key("seq"); w.int(Int64(e.seq))
        switch e.kind {
        case .location(let l): location(l, into: &w)
        case .sealedLocation(let p): sealedPoint(p, into: &w)
        case .status, .ended, .timer, .missedCheckIn: break
        }
        w.key("at"); w.int(e.at)
        w.endObject()
    }

    /// Any panic delivery: an event, or `panic.stale`, `panic.revoked`, `panic.watchers`.
    public static func panicDelivery(_ d: PanicDelivery, now: Int64, into w: inout JSONWriter) {
        if case .event(let e) = d.kind {
            panicEvent(d.stream, e, into: &w)
            return
        }
        w.beginObject()
        w.key("type")
        switch d.kind {
        case .event: break  // handled above
        case .stale: w.string("panic.stale")
        case .revoked: w.string("panic.revoked")
        case .watchers: w.string("panic.watchers")
        case .rekeyed: w.string("panic.rekeyed")
        }
        w.key("stream"); w.string(d.stream.description)
        switch d.kind {
        case .stale(let since):
            w.key("last_location_at"); w.int(since)
            w.key("at"); w.int(now)
        case .watchers(let count):
            w.key("count"); w.int(Int64(count))
        case .rekeyed(let kid, let box):
            w.key("kid"); w.string(kid.text)
            if let box { w.key("box"); w.string(box.text) }
        default:
            break
        }
        w.endObject()
    }

    /// The `state` object of `panic.watch` and `panic.resume` replies. Its `trail` is cut to its
    /// newest points where the document would pass `maxBytes` (a history of up to 100,000 events
    /// does not fit a reply), and `"trail_truncated":true` says so: the whole trail is a `since`
    /// replay away (docs/PROTOCOL.md, "Watching").
    public static func panicState(_ s: PanicStream, maxBytes: Int = .max, into w: inout JSONWriter) {
        w.beginObject()
        w.key("stream"); w.string(s.id.description)
        w.key("status"); w.string(s.status.rawValue)
        w.key("started_at"); w.int(s.startedAt)
        w.key("updated_at"); w.int(s.updatedAt)
        w.key("seq"); w.int(Int64(s.seq))
        if let note = s.note { w.key("note"); w.string(note) }
        if let keys = s.e2e {
            // The key id only: the boxes are each member's own (the member's watch reply).
            w.key("e2e"); w.bool(true)
            w.key("kid"); w.string(keys.kid.text)
        }
        lastPosition(s.last, into: &w)
        w.key("trail")
        w.beginArray()
        let trail = s.trail
        let start = w.mark()
        for e in trail { trailPoint(e, into: &w) }
        // Room for what follows the trail: the timer, escalation and end objects, and the
        // reply's own closing (at most ~250 bytes; more is kept free).
        let limit = maxBytes == .max ? Int.max : maxBytes - 512
        let cut = w.count > limit
        if cut {
            // The newest points that fit, measured one by one from the end (only when it does not fit).
            w.rollBack(to: start)
            var room = limit - w.count
            var first = trail.count
            var scratch = JSONWriter(capacity: 256)
            while first > 0 {
                scratch.reset()
                trailPoint(trail[first - 1], into: &scratch)
                let size = scratch.count + 1  // and its comma
                guard size <= room else { break }
                room -= size
                first -= 1
            }
            for e in trail[first...] { trailPoint(e, into: &w) }
        }
        w.endArray()
        if cut { w.key("trail_truncated"); w.bool(true) }
        if let due = s.dueAt {
            w.key("timer")
            w.beginObject()
            w.key("due_at"); w.int(due)
            w.endObject()
        }
        if let at = s.missedCheckInAt {
            w.key("escalated")
            w.beginObject()
            w.key("reason"); w.string(missedCheckInReason)
            w.key("at"); w.int(at)
            w.key("sent_at"); w.int(s.missedCheckInSentAt ?? at)
            w.endObject()
        }
        if let ended = s.ended {
            w.key("ended")
            w.beginObject()
            w.key("reason"); w.string(ended.reason.rawValue)
            w.key("at"); w.int(ended.at)
            w.endObject()
        }
        w.endObject()
    }
}

extension RequestError {
    public static func from(_ failure: PanicFailure) -> RequestError {
        switch failure {
        case .forbidden: return RequestError("forbidden", "no stream with that id and token")
        case .ended: return RequestError("stream_ended", "the stream has ended")
        case .capacityExceeded: return RequestError("capacity_exceeded", "the server holds its maximum number of streams; try again later")
        // The same code: for the client it is the same situation (no stream now, retry later).
        case .reserveOnly: return RequestError("capacity_exceeded", "the server keeps its last streams for addresses with no idle stream; try again later")
        case .tooManyWatchTokens: return RequestError("too_many_watch_tokens", "the stream has its maximum number of watch tokens")
        case .sinceAhead: return RequestError("invalid_since", field: "since", "since is after the stream's last seq")
        case .invalidTimer: return RequestError("invalid_timer", "the timer's deadline must be in the future and within the longest timer")
        case .timerNeedsAmber: return RequestError("timer_needs_amber", "a safety timer is set on an amber stream only")
        case .seqMismatch(let seq, let status):
            var e = RequestError("seq_mismatch", field: "seq", "the update was sealed for another seq or status; seal it again for the next seq and the current status")
            e.currentSeq = seq
            e.currentStatus = status
            return e
        case .sealedRequired: return RequestError("sealed_required", "the stream is end-to-end encrypted: its updates are sealed")
        case .notE2E: return RequestError("not_e2e", "the stream is not end-to-end encrypted")
        }
    }
}
