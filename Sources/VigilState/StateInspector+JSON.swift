import VigilCore

/// One JSON line of the inspector's output: `{"type": …, "file": …, fields…}`.
///
/// Field names are snake_case, as on the wire. Digests are cut to 8 hex digits (see
/// `StateInspector`); ids are printed whole (they open nothing without a token). What people
/// wrote or where they were (coordinates, accuracy, heading and speed, notes, pin titles and
/// descriptions) is printed only with `content`; without it, texts are given as their size in bytes
/// and a location event as its kind alone.
struct InspectorLine {
    let file: String
    let content: Bool
    var w = JSONWriter(capacity: 512)

    init(file: String, content: Bool) {
        self.file = file
        self.content = content
    }

    mutating func begin(_ type: StaticString) {
        w.reset()
        w.beginObject()
        w.key("type")
        w.string(type.description)
        w.field("file", file)
    }

    mutating func end() -> String {
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// "sha256:1a2b3c4d…": the first 4 bytes of the digest only.
    static func shortDigest(_ digest: TokenDigest) -> String {
        "sha256:" + Hex.lowercase(digest.bytes.prefix(4)) + "…"
    }

    /// `"cluster_sequence"`: a snapshot's replicated-stream sequence, null when a standalone node
    /// wrote it (or a version before 5).
    mutating func replicatedSequence(_ sequence: UInt64?) {
        w.key("cluster_sequence")
        if let sequence { w.int(Int64(bitPattern: sequence)) } else { w.null() }
    }

    mutating func pin(_ pin: Pin) {
        w.field("id", pin.id.description)
        if content {
            w.field("lat", pin.point.lat)
            w.field("lon", pin.point.lon)
            w.field("title", pin.title)
            w.field("description", pin.description)
        } else {
            w.field("title_bytes", Int64(pin.title.utf8.count))
            w.field("description_bytes", Int64(pin.description.utf8.count))
        }
        w.field("category", pin.category)
        w.field("created_at", pin.createdAt)
        w.field("updated_at", pin.updatedAt)
        w.field("expires_at", pin.expiresAt)
        w.field("sequence", Int64(bitPattern: pin.sequence))
        w.field("up", Int64(pin.up))
        w.field("down", Int64(pin.down))
        w.field("votes", Int64(pin.votes.count))
        if let range = pin.rangeMeters { w.field("range_m", Int64(range)) }
        w.field("edit_digest", Self.shortDigest(pin.editDigest))
    }

    /// A location's fields (only called with `content`).
    mutating func location(_ location: PanicLocation) {
        w.field("lat", location.lat)
        w.field("lon", location.lon)
        if let v = location.accuracyM { w.field("accuracy_m", v) }
        if let v = location.heading { w.field("heading", v) }
        if let v = location.speedMps { w.field("speed_mps", v) }
    }

    mutating func event(_ event: PanicEvent) {
        w.beginObject()
        w.field("seq", Int64(bitPattern: event.seq))
        w.field("at", event.at)
        switch event.kind {
        case .location(let l):
            w.key("location")
            if content {
                w.beginObject()
                location(l)
                w.endObject()
            } else {
                w.bool(true)
            }
        case .status(let s):
            w.field("status", s.rawValue)
        case .ended(let r):
            w.field("ended", r.rawValue)
        case .timer(let due):
            optionalTime("timer_due_at", due)
        case .sealedLocation(let p):
            // Sizes only, with or without `content`: the server cannot read it, and its bytes and
            // key id are nobody's business.
            w.field("sealed_bytes", Int64(p.sealed.count))
        case .missedCheckIn(let due, let last, let sentAt):
            w.field("missed_check_in", due)
            w.field("sent_at", sentAt)
            switch last.position {
            case .clear(let l):
                w.key("last_location")
                if content {
                    w.beginObject()
                    location(l)
                    w.field("at", last.at)
                    w.endObject()
                } else {
                    w.bool(true)
                }
            case .sealed(let p, let seq):
                w.field("last_sealed_bytes", Int64(p.sealed.count))
                w.field("last_seq", Int64(bitPattern: seq))
            }
        }
        w.endObject()
    }

    mutating func optionalTime(_ name: StaticString, _ time: Int64?) {
        w.key(name)
        if let time { w.int(time) } else { w.null() }
    }

    mutating func digests(_ name: StaticString, _ digests: [TokenDigest]) {
        w.key(name)
        w.beginArray()
        for d in digests { w.string(Self.shortDigest(d)) }
        w.endArray()
    }

    mutating func note(_ note: String?) {
        guard content else {
            w.key("note_bytes")
            if let note { w.int(Int64(note.utf8.count)) } else { w.null() }
            return
        }
        w.key("note")
        if let note { w.string(note) } else { w.null() }
    }

    /// An e2e stream's keys as counts and sizes only (`E2EFields.sizes`): never a kid, a box or
    /// a member's number, with or without `content`.
    mutating func e2eSizes(_ keys: E2EKeys) {
        let sizes = E2EFields.sizes(keys)
        w.key("e2e")
        w.beginObject()
        w.field("boxes", Int64(sizes.boxes))
        w.field("box_bytes", Int64(sizes.boxBytes))
        w.endObject()
    }

    /// A location as an object of its fields, with `at` when given; absent without `content`.
    mutating func locationObject(_ key: StaticString, _ l: PanicLocation, at: Int64? = nil) {
        guard content else { return }
        w.key(key)
        w.beginObject()
        location(l)
        if let at { w.field("at", at) }
        w.endObject()
    }

    mutating func stream(_ s: PanicStream) {
        w.field("id", s.id.description)
        w.field("status", s.status.rawValue)
        w.field("started_at", s.startedAt)
        w.field("updated_at", s.updatedAt)
        w.field("seq", Int64(bitPattern: s.seq))
        w.field("last_at", s.last.at)
        switch s.last.position {
        case .clear(let l): locationObject("last", l, at: s.last.at)
        case .sealed(let p, _): w.field("last_sealed_bytes", Int64(p.sealed.count))
        }
        note(s.note)
        if let keys = s.e2e { e2eSizes(keys) }
        w.key("ended")
        if let end = s.ended {
            w.beginObject()
            w.field("reason", end.reason.rawValue)
            w.field("at", end.at)
            w.endObject()
        } else {
            w.null()
        }
        w.field("owner_digest", Self.shortDigest(s.ownerTokenDigest))
        digests("watch_tokens", s.watchTokenDigests)
        w.field("stale_notified", s.isStaleNotified)
        optionalTime("timer_due_at", s.dueAt)
        optionalTime("missed_check_in_at", s.missedCheckInAt)
        optionalTime("missed_check_in_sent_at", s.missedCheckInSentAt)
        if let circle = s.circle { w.field("circle", circle.description) }
        w.field("history_capacity", Int64(s.history.capacity))
        w.key("history")
        w.beginArray()
        for e in s.history.all { event(e) }
        w.endArray()
    }

    mutating func record(_ record: JournalRecord) {
        switch record {
        case .pinPut(let p):
            w.field("record", "pinPut")
            w.key("pin")
            w.beginObject()
            pin(p)
            w.endObject()
        case .pinRemove(let id):
            w.field("record", "pinRemove")
            w.field("id", id.description)
        case .pinVote(let id, _, let value):
            // The voter is left out, as pins show only their counts: it would link one
            // address's votes across pins for whoever reads the output.
            w.field("record", "pinVote")
            w.field("id", id.description)
            w.field("value", Int64(value))
        case .panicStart(let start):
            w.field("record", "panicStart")
            w.field("stream", start.id.description)
            w.field("status", start.status.rawValue)
            switch start.origin {
            case .clear(let l, let n):
                locationObject("location", l)
                note(n)
            case .e2e(let e2e):
                w.field("sealed_bytes", Int64(e2e.sealed.count))
                e2eSizes(e2e.keys)
            }
            w.field("started_at", start.startedAt)
            w.field("owner_digest", Self.shortDigest(start.ownerDigest))
            digests("watch_tokens", start.watchTokens)
            w.field("history_capacity", Int64(start.historyCapacity))
            if let due = start.dueAt { w.field("timer_due_at", due) }
            if let circle = start.circle { w.field("circle", circle.description) }
        case .panicEvent(let id, let e):
            w.field("record", "panicEvent")
            w.field("stream", id.description)
            w.key("event")
            event(e)
        case .panicInvite(let id, let d):
            w.field("record", "panicInvite")
            w.field("stream", id.description)
            w.field("digest", Self.shortDigest(d))
        case .panicRevoke(let id, let d):
            w.field("record", "panicRevoke")
            w.field("stream", id.description)
            w.field("digest", Self.shortDigest(d))
        case .panicRekey(let id, let keys):
            w.field("record", "panicRekey")
            w.field("stream", id.description)
            e2eSizes(keys)
        case .panicRemove(let id):
            w.field("record", "panicRemove")
            w.field("stream", id.description)
        case .circlePut(let c):
            w.field("record", "circlePut")
            w.key("circle")
            w.beginObject()
            circle(c)
            w.endObject()
        case .circleRemove(let id):
            w.field("record", "circleRemove")
            w.field("circle", id.description)
        case .noticeSettled(let s):
            // Which notice and how it ended; the subscription's endpoint or handle never.
            w.field("record", "noticeSettled")
            w.field("circle", s.circle.description)
            w.field("notice", s.notice.description)
            w.field("kind", s.notice.kind.name)
            w.field("settlement", s.settlement.name)
        case .noticeAcked(let a):
            w.field("record", "noticeAcked")
            w.field("circle", a.circle.description)
            w.field("notice", a.notice.description)
            w.field("kind", a.notice.kind.name)
            switch a.by {
            case .owner: w.field("by", "owner")
            case .member(let m): w.field("by", Int64(m))
            }
            w.field("at", a.at)
        case .answerKept(let a):
            // Sizes only: the answer is sealed, and its digests are nobody's business.
            w.field("record", "answerKept")
            w.field("sealed_bytes", Int64(a.sealed.count))
            w.field("created_at", a.createdAt)
        }
    }
}
