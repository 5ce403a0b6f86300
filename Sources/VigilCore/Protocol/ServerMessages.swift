/// The server's JSON messages (docs/PROTOCOL.md), written straight into a byte buffer.
///
/// Events are encoded once per change, whatever the number of recipients; the buffer they are
/// written into is the caller's (the server reuses one), so steady-state encoding allocates only
/// where Swift strings do.
public enum ServerMessages {
    /// Limits announced in the welcome message, besides the pin rules (`PinSettings`): the
    /// session's message caps, and the caps on the texts of panic streams and check-in circles,
    /// so that a client can check a note or a label before sending it.
    public struct Limits: Sendable {
        public var maxMessageBytes: Int
        public var messagesPerSecond: Int
        public var messageBurst: Int
        /// A panic stream's `note` (`panic.start`).
        public var panicNote: TextCap
        /// A check-in member's label (`checkin.create`'s `members`, `checkin.invite`'s `label`).
        public var checkinLabel: TextCap
        /// A check-in answer's `note` (`checkin.answer`).
        public var checkinNote: TextCap

        public init(maxMessageBytes: Int, messagesPerSecond: Int, messageBurst: Int,
                    panic: PanicSettings = PanicSettings(), checkin: CheckinSettings = CheckinSettings()) {
            self.maxMessageBytes = maxMessageBytes
            self.messagesPerSecond = messagesPerSecond
            self.messageBurst = messageBurst
            self.panicNote = TextCap(characters: panic.noteMaxCharacters, bytes: panic.noteMaxBytes)
            self.checkinLabel = TextCap(characters: checkin.labelMaxCharacters, bytes: checkin.labelMaxBytes)
            self.checkinNote = TextCap(characters: checkin.noteMaxCharacters, bytes: checkin.noteMaxBytes)
        }
    }

    /// A text's caps: characters (extended grapheme clusters) and bytes of UTF-8, both after
    /// trimming surrounding white space (`RequestDecoder.fits`).
    public struct TextCap: Equatable, Sendable {
        public var characters: Int
        public var bytes: Int
    }

    public static func welcome(session: String, settings: PinSettings, limits: Limits, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type"); w.string("welcome")
        w.key("session"); w.string(session)
        w.key("protocol"); w.int(1)
        w.key("limits")
        w.beginObject()
        w.key("max_message_bytes"); w.int(Int64(limits.maxMessageBytes))
        w.key("title_max_chars"); w.int(Int64(settings.titleMaxCharacters))
        w.key("title_max_bytes"); w.int(Int64(settings.titleMaxBytes))
        w.key("description_max_chars"); w.int(Int64(settings.descriptionMaxCharacters))
        w.key("description_max_bytes"); w.int(Int64(settings.descriptionMaxBytes))
        w.key("categories")
        w.beginArray()
        for c in settings.categories { w.string(c) }
        w.endArray()
        w.key("ttl_s")
        w.beginObject()
        w.key("default"); w.int(Int64(settings.defaultTTLSeconds))
        w.key("min"); w.int(Int64(settings.minTTLSeconds))
        w.key("max"); w.int(Int64(settings.maxTTLSeconds))
        w.endObject()
        w.key("vote_flag_threshold"); w.int(Int64(settings.voteFlagThreshold))
        w.key("writes_per_minute"); w.int(Int64(settings.writesPerMinute))
        w.key("write_burst"); w.int(Int64(settings.writeBurst))
        w.key("messages_per_second"); w.int(Int64(limits.messagesPerSecond))
        w.key("message_burst"); w.int(Int64(limits.messageBurst))
        w.key("max_subscribe_pins"); w.int(Int64(settings.maxSubscribePins))
        w.key("max_range_m"); w.int(Int64(settings.maxRangeMeters))
        w.key("panic_note_max_chars"); w.int(Int64(limits.panicNote.characters))
        w.key("panic_note_max_bytes"); w.int(Int64(limits.panicNote.bytes))
        w.key("checkin_label_max_chars"); w.int(Int64(limits.checkinLabel.characters))
        w.key("checkin_label_max_bytes"); w.int(Int64(limits.checkinLabel.bytes))
        w.key("checkin_note_max_chars"); w.int(Int64(limits.checkinNote.characters))
        w.key("checkin_note_max_bytes"); w.int(Int64(limits.checkinNote.bytes))
        w.endObject()
        w.endObject()
    }

    /// `{"type":"ok","ref":R,...}`: `body` writes the op-specific members (keys and values).
    public static func ok(ref: JSONValue?, into w: inout JSONWriter, _ body: (inout JSONWriter) -> Void = { _ in }) {
        w.beginObject()
        w.key("type"); w.string("ok")
        if let ref { w.key("ref"); w.value(ref) }
        body(&w)
        w.endObject()
    }

    public static func error(ref: JSONValue?, _ e: RequestError, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type"); w.string("error")
        if let ref { w.key("ref"); w.value(ref) }
        w.key("code"); w.string(e.code)
        if let field = e.field { w.key("field"); w.string(field) }
        if let retry = e.retryAfterMs { w.key("retry_after_ms"); w.int(retry) }
        if let seq = e.currentSeq { w.key("current_seq"); w.int(Int64(clamping: seq)) }
        if let status = e.currentStatus { w.key("status"); w.string(status.rawValue) }
        w.key("message"); w.string(e.message)
        w.endObject()
    }

    /// The public pin object: nothing about its creator, no token digest, no voters. The pin's
    /// kept bytes when it has them (`Pin.json`), else encoded from its fields.
    public static func pin(_ p: Pin, into w: inout JSONWriter) {
        if let json = p.json {
            w.raw(json)
        } else {
            pinFields(p, into: &w)
        }
    }

    /// The pin object's bytes, to keep in `Pin.json`.
    public static func pinJSON(_ p: Pin) -> [UInt8] {
        var w = JSONWriter(capacity: 320)
        pinFields(p, into: &w)
        return w.bytes
    }

    /// The pin object from the pin's fields: the one encoding of a pin (`pin` and `pinJSON`).
    private static func pinFields(_ p: Pin, into w: inout JSONWriter) {
        w.beginObject()
        w.key("id"); w.string(p.id.description)
        w.key("lat"); w.double(p.point.lat)
        w.key("lon"); w.double(p.point.lon)
        w.key("title"); w.string(p.title)
        w.key("description"); w.string(p.description)
        w.key("category"); w.string(p.category)
        w.key("created_at"); w.int(p.createdAt)
        w.key("updated_at"); w.int(p.updatedAt)
        w.key("expires_at"); w.int(p.expiresAt)
        w.key("up"); w.int(Int64(p.up))
        w.key("down"); w.int(Int64(p.down))
        if let range = p.rangeMeters { w.key("range_m"); w.int(Int64(range)) }
        w.endObject()
    }

    public static func pinEvent(_ kind: PinEventKind, _ p: Pin, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type")
        switch kind {
        case .added: w.string("pin.added")
        case .updated: w.string("pin.updated")
        case .removed: w.string("pin.removed")
        case .expired: w.string("pin.expired")
        }
        w.key("pin")
        pin(p, into: &w)
        if case .removed(let reason) = kind {
            w.key("reason"); w.string(reason.rawValue)
        }
        w.endObject()
    }
}
