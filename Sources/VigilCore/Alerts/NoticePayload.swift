/// The bytes a notice becomes: the JSON a browser's service worker decrypts from a push message,
/// and the JSON body of a webhook to the operator's relay (docs/PROTOCOL.md, "Notices").
///
/// What is in them, and what never is. Both carry the notice's id and kind and the ids of its
/// circle and stream: random, and no capability (watching still needs the member's token, which
/// stays on the member's device; the server keeps only its digest, so it could not put it in a
/// payload if it wanted to). Neither carries a location, a label, a note, a token, or anything
/// the person typed. The push payload adds the page to open; the push service sees only its
/// ciphertext and size. The webhook body adds the handle the app registered, which is the
/// relay's own and means nothing to anyone else.
public enum NoticePayload {
    /// The page that opens when the notification is tapped: the stream for the panic kinds, the
    /// circle otherwise, and the notice, which the page acknowledges (`checkin.ack`) once it shows
    /// it: the tap is the contact's "I have seen it". The page finds the member's token in its own
    /// storage by the circle.
    public static func url(_ notice: Notice) -> String {
        if let stream = notice.stream { return "/watch#stream=\(stream)&circle=\(notice.circle)&notice=\(notice.id)" }
        return "/circle#circle=\(notice.circle)&notice=\(notice.id)"
    }

    /// `{"v":1,"notice":…,"kind":…,"circle":…,"stream":…,"status":…,"at":…,"url":…}`.
    public static func push(_ notice: Notice) -> [UInt8] {
        var w = JSONWriter(capacity: 320)
        w.beginObject()
        common(notice, into: &w)
        w.field("url", url(notice))
        w.endObject()
        return w.bytes
    }

    /// `{"v":1,"type":"vigil.notice","handle":…,"notice":…,"kind":…,"circle":…,"stream":…,
    /// "status":…,"at":…,"urgent":…,"expires_at":…}`.
    public static func webhook(_ notice: Notice, handle: String) -> [UInt8] {
        var w = JSONWriter(capacity: 320 + handle.utf8.count)
        w.beginObject()
        w.field("type", "vigil.notice")
        w.field("handle", handle)
        common(notice, into: &w)
        w.field("urgent", isUrgent(notice))
        w.field("expires_at", notice.expiresAt)
        w.endObject()
        return w.bytes
    }

    /// Danger wakes the phone: a red panic's start, any escalation (the hub set it red), and a
    /// member's "are you safe?". An amber start, an end and an answer can wait.
    public static func isUrgent(_ notice: Notice) -> Bool {
        switch notice.kind {
        case .panicStarted: return notice.status == .red
        case .panicEscalated, .checkinRequested: return true
        case .panicEnded, .checkinAnswered: return false
        }
    }

    private static func common(_ notice: Notice, into w: inout JSONWriter) {
        w.field("v", Int64(1))
        w.field("notice", notice.id.description)
        w.field("kind", notice.kind.name)
        w.field("circle", notice.circle.description)
        if let stream = notice.stream { w.field("stream", stream.description) }
        if let status = notice.status { w.field("status", status.rawValue) }
        w.field("at", notice.at)
    }
}
