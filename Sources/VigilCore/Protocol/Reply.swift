/// The answer to one client request, as a value: what a handler returns, what tests assert on,
/// and what `ServerMessages.reply` encodes as `{"type":"ok",...}` or `{"type":"error",...}`.
///
/// Every request gets exactly one reply (docs/PROTOCOL.md). Messages that follow a reply to the
/// same client (a watch's replayed events, a resumed owner's watcher count) are deliveries, not
/// part of the reply.
public enum Reply: Sendable {
    /// `ok` with no members (unsubscribe, unwatch, revoke).
    case ok
    case error(RequestError)
    /// `subscribe`: the pins inside the area, newest first, and whether the list was cut.
    case subscribed(pins: [Pin], truncated: Bool)
    /// `subscribe` with `"view":"clusters"`: the precision chosen and the cells with pins.
    case clusters(precision: Int, cells: [ClusterCell])
    /// `pin.create`: the pin and its edit token (shown once, never stored).
    case pinCreated(Pin, editToken: String)
    /// `pin.update`, `pin.vote`: the pin as it now is.
    case pin(Pin)
    /// `pin.delete`.
    case pinDeleted(PinID)
    /// `panic.start`: the stream, its owner token and one watch token per contact (shown once).
    /// `dueAt`: the safety timer's deadline, when the start set one; `circle`: the check-in
    /// circle the stream was started for, echoed.
    case panicStarted(stream: StreamID, seq: UInt64, ownerToken: String, watchTokens: [String], dueAt: Int64?, circle: CircleID? = nil)
    /// `panic.update`, `panic.status`, `panic.end`: the stream's seq after the change.
    case seq(UInt64)
    /// `panic.timer`: the stream's seq after it, and the deadline now set (nil: no timer).
    case timer(seq: UInt64, dueAt: Int64?)
    /// `panic.watch`, `panic.resume`: the stream's state, and for a watch with `since` whether
    /// events were lost (`gap`).
    /// `box`: a circle member's own key box, when it watches an end-to-end encrypted stream.
    case panicState(PanicStream, gap: Bool, box: SealedBytes? = nil)
    /// `panic.invite`: the new contact's watch token.
    case watchToken(String)
    /// The `checkin.*` replies that carry more than `ok`.
    case checkin(CheckinReply)
    /// A repeat of a request with an idempotency key (docs/PROTOCOL.md, "Writes that are safe to
    /// retry"): the first answer's members after `"type":"ok"` (`members`, as `keptMembers` cut
    /// them: empty, or starting with a comma), sent again with `"repeat":true`.
    case repeated(members: [UInt8])
}

extension Reply {
    public static func from(_ result: Result<Pin, PinFailure>) -> Reply {
        switch result {
        case .success(let pin): return .pin(pin)
        case .failure(let failure): return .error(.from(failure))
        }
    }

    public static func from(_ result: Result<UInt64, PanicFailure>) -> Reply {
        switch result {
        case .success(let seq): return .seq(seq)
        case .failure(let failure): return .error(.from(failure))
        }
    }

    public var isError: Bool {
        if case .error = self { return true }
        return false
    }
}

extension ServerMessages {
    /// Encodes a reply, echoing the request's `ref`. A pin list is cut where the reply would pass
    /// `maxBytes` (and says `truncated`), so no reply outgrows a connection's output budget.
    public static func reply(_ reply: Reply, ref: JSONValue?, maxBytes: Int = .max, into w: inout JSONWriter) {
        switch reply {
        case .error(let e):
            error(ref: ref, e, into: &w)
        case .ok:
            ok(ref: ref, into: &w)
        case .subscribed(let pins, let truncated):
            ok(ref: ref, into: &w) { w in
                w.key("pins")
                w.beginArray()
                var cut = truncated
                // Room for the closing `],"truncated":true}` after the last pin that fits.
                let limit = maxBytes == .max ? .max : maxBytes - 24
                // Through a pointer, reading only the kept JSON: `for p in pins` copied each pin
                // out of the array (its strings, votes and JSON retained, then released) to copy
                // its bytes.
                pins.withUnsafeBufferPointer { pins in
                    for i in pins.indices {
                        let mark = w.mark()
                        if let json = pins[i].json { w.raw(json) } else { pin(pins[i], into: &w) }
                        if w.count > limit {
                            w.rollBack(to: mark)
                            cut = true
                            break
                        }
                    }
                }
                w.endArray()
                if cut { w.key("truncated"); w.bool(true) }
            }
        case .clusters(let precision, let cells):
            ok(ref: ref, into: &w) { w in clusterList(precision: precision, cells, maxBytes: maxBytes, into: &w) }
        case .pinCreated(let p, let token):
            ok(ref: ref, into: &w) { w in
                w.key("pin"); pin(p, into: &w)
                w.key("edit_token"); w.string(token)
            }
        case .pin(let p):
            ok(ref: ref, into: &w) { w in w.key("pin"); pin(p, into: &w) }
        case .pinDeleted(let id):
            ok(ref: ref, into: &w) { w in w.key("id"); w.string(id.description) }
        case .panicStarted(let stream, let seq, let ownerToken, let watchTokens, let dueAt, let circle):
            ok(ref: ref, into: &w) { w in
                w.key("stream"); w.string(stream.description)
                w.key("seq"); w.int(Int64(seq))
                w.key("owner_token"); w.string(ownerToken)
                w.key("watch_tokens")
                w.beginArray()
                for t in watchTokens { w.string(t) }
                w.endArray()
                if let dueAt { w.key("due_at"); w.int(dueAt) }
                if let circle { w.key("circle"); w.string(circle.description) }
            }
        case .seq(let seq):
            ok(ref: ref, into: &w) { w in w.key("seq"); w.int(Int64(seq)) }
        case .timer(let seq, let dueAt):
            ok(ref: ref, into: &w) { w in
                w.key("seq"); w.int(Int64(seq))
                w.key("due_at")
                if let dueAt { w.int(dueAt) } else { w.null() }
            }
        case .panicState(let s, let gap, let box):
            ok(ref: ref, into: &w) { w in
                w.key("state"); panicState(s, maxBytes: maxBytes, into: &w)
                if let box { w.key("box"); w.string(box.text) }
                if gap { w.key("gap"); w.bool(true) }
            }
        case .watchToken(let token):
            ok(ref: ref, into: &w) { w in w.key("watch_token"); w.string(token) }
        case .checkin(let r):
            ok(ref: ref, into: &w) { w in checkinReply(r, into: &w) }
        case .repeated(let members):
            w.beginObject()
            w.key("type"); w.string("ok")
            if let ref { w.key("ref"); w.value(ref) }
            w.key("repeat"); w.bool(true)
            // `members` is empty or `,"name":value,...`: spliced after the comma-terminated pair
            // above, the writer's own separator is not wanted.
            if !members.isEmpty { w.raw(Array(members.dropFirst())) }
            w.endObject()
        }
    }

    /// The members of an `ok` reply after `"type":"ok"`, as they are kept for a repeat: the reply
    /// encoded without a `ref`, its `{"type":"ok"` and closing `}` cut off. Empty for a plain `ok`;
    /// else they start with a comma. nil for an error (errors are not kept).
    public static func keptMembers(of reply: Reply, into w: inout JSONWriter) -> [UInt8]? {
        if case .error = reply { return nil }
        w.reset()
        self.reply(reply, ref: nil, into: &w)
        let bytes = w.bytes
        let prefix = Array(#"{"type":"ok""#.utf8)
        guard bytes.count >= prefix.count + 1, bytes.starts(with: prefix), bytes.last == 0x7D else { return nil }
        return Array(bytes[prefix.count..<(bytes.count - 1)])
    }
}
