/// The `checkin.*` replies that carry more than `ok` (docs/PROTOCOL.md, "Check-in circles").
public enum CheckinReply: Sendable {
    /// `checkin.create`: the circle, its owner token and a token per member (shown once).
    case created(CheckinCircle, ownerToken: String, memberTokens: [String], settings: CheckinSettings)
    /// `checkin.open` (owner: every member) and `checkin.join` (a member: itself only), with the
    /// circle's panic streams still active (`panics`; the panic hub's, joined by the application).
    case state(CheckinCircle, role: CheckinRole, settings: CheckinSettings, panics: [PanicStream] = [])
    /// `checkin.invite`: the new member and its token (shown once).
    case invited(CheckinMember, token: String)
    /// `checkin.request`: the request as recorded.
    case requested(CheckinAsk)
    /// `checkin.answer`: the answer as recorded.
    case answered(CheckinAnswer)
    /// `checkin.home`: home safe as it now is (nil: none).
    case home(CheckinHome?)
    /// `checkin.register`: the subscription's id (the same for the same destination again).
    case registered(SubscriptionID)
}

extension ServerMessages {
    static func checkinReply(_ r: CheckinReply, into w: inout JSONWriter) {
        switch r {
        case .created(let circle, let ownerToken, let tokens, let settings):
            w.field("circle", circle.id.description)
            w.field("owner_token", ownerToken)
            w.key("members")
            w.beginArray()
            for (m, token) in zip(circle.members, tokens) {
                w.beginObject()
                member(m.id, m.label, into: &w)
                w.field("member_token", token)
                w.endObject()
            }
            w.endArray()
            w.field("expires_at", circle.idleDeadline(settings))
        case .state(let circle, let role, let settings, let panics):
            w.key("state")
            checkinState(circle, role: role, settings: settings, panics: panics, into: &w)
        case .invited(let m, let token):
            member(m.id, m.label, into: &w)
            w.field("member_token", token)
        case .requested(let ask):
            w.field("at", ask.at)
        case .answered(let answer):
            w.key("answer")
            checkinAnswer(answer, into: &w)
        case .home(let home):
            w.key("home")
            if let home { checkinHome(home, into: &w) } else { w.null() }
        case .registered(let id):
            w.field("subscription", id.description)
        }
    }

    private static func member(_ id: UInt32, _ label: String?, into w: inout JSONWriter) {
        w.field("member", Int64(id))
        if let label { w.field("label", label) }
    }

    private static func ask(_ a: CheckinAsk, into w: inout JSONWriter) {
        w.beginObject()
        member(a.member, a.label, into: &w)
        w.field("at", a.at)
        w.endObject()
    }

    static func checkinAnswer(_ a: CheckinAnswer, into w: inout JSONWriter) {
        w.beginObject()
        w.field("status", "safe")
        w.field("at", a.at)
        if let note = a.note { w.field("note", note) }
        w.key("answered")
        w.beginArray()
        for r in a.answered { ask(r, into: &w) }
        w.endArray()
        w.endObject()
    }

    static func checkinHome(_ h: CheckinHome, into w: inout JSONWriter) {
        w.beginObject()
        w.field("at", h.at)
        w.field("until", h.until)
        w.endObject()
    }

    /// The `state` object of `checkin.open` and `checkin.join`. The member list is the owner's
    /// alone; a member sees itself, and who asked. `panics`: the circle's streams; those still
    /// active are listed (an ended one's news was its end), so a member who connects later finds
    /// a panic going on and watches it with its member token.
    public static func checkinState(_ c: CheckinCircle, role: CheckinRole, settings: CheckinSettings, panics: [PanicStream] = [],
                                    into w: inout JSONWriter) {
        w.beginObject()
        w.field("circle", c.id.description)
        w.field("created_at", c.createdAt)
        w.field("active_at", c.activeAt)
        w.field("expires_at", c.idleDeadline(settings))
        switch role {
        case .owner:
            w.field("role", "owner")
            w.key("members")
            w.beginArray()
            for m in c.members {
                w.beginObject()
                member(m.id, m.label, into: &w)
                w.field("added_at", m.addedAt)
                w.endObject()
            }
            w.endArray()
        case .member(let id):
            w.field("role", "member")
            w.key("you")
            w.beginObject()
            member(id, c.member(id)?.label, into: &w)
            w.endObject()
        }
        w.key("requests")
        w.beginArray()
        for r in c.requests { ask(r, into: &w) }
        w.endArray()
        if let a = c.answer { w.key("answer"); checkinAnswer(a, into: &w) }
        if let h = c.home { w.key("home"); checkinHome(h, into: &w) }
        w.key("panics")
        w.beginArray()
        for stream in panics where stream.isActive {
            w.beginObject()
            w.field("stream", stream.id.description)
            w.field("status", stream.status.rawValue)
            w.field("started_at", stream.startedAt)
            if let escalated = stream.missedCheckInAt { w.field("escalated_at", escalated) }
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    /// `checkin.requested`, `checkin.answered`, `checkin.home`, `checkin.revoked`, `checkin.closed`
    /// or `checkin.panic`.
    public static func checkinDelivery(_ d: CheckinDelivery, now: Int64, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type")
        switch d.kind {
        case .requested: w.string("checkin.requested")
        case .answered: w.string("checkin.answered")
        case .home: w.string("checkin.home")
        case .revoked: w.string("checkin.revoked")
        case .closed: w.string("checkin.closed")
        case .panic: w.string("checkin.panic")
        }
        w.field("circle", d.circle.description)
        switch d.kind {
        case .requested(let a):
            member(a.member, a.label, into: &w)
            w.field("at", a.at)
        case .answered(let a):
            w.key("answer")
            checkinAnswer(a, into: &w)
        case .home(let h, let lapsed):
            if lapsed {
                w.field("state", "lapsed")
                w.field("until", h?.until ?? now)
                w.field("at", now)
            } else if let h {
                w.field("state", "set")
                w.field("until", h.until)
                w.field("at", h.at)
            } else {
                w.field("state", "cleared")
                w.field("at", now)
            }
        case .revoked(let m):
            w.field("member", Int64(m))
        case .closed(let reason):
            w.field("reason", reason.rawValue)
            w.field("at", now)
        case .panic(let news):
            w.field("stream", news.stream.description)
            switch news.event {
            case .started: w.field("event", "started")
            case .escalated: w.field("event", "escalated")
            case .ended(let reason):
                w.field("event", "ended")
                w.field("reason", reason.rawValue)
            }
            w.field("status", news.status.rawValue)
            w.field("at", news.at)
        }
        w.endObject()
    }
}

extension RequestError {
    public static func from(_ failure: CheckinFailure) -> RequestError {
        switch failure {
        case .forbidden: return RequestError("forbidden", "no circle with that id and token")
        case .capacityExceeded: return RequestError("capacity_exceeded", "the server holds its maximum number of circles; try again later")
        case .tooManyMembers: return RequestError("too_many_members", "the circle has its maximum number of members")
        case .rateLimited(let retry):
            return RequestError("rate_limited", "this member asked too often; retry after \(retry) ms", retryAfterMs: retry)
        case .invalidHome: return RequestError("invalid_home", "home safe must end in the future and within the longest home safe")
        case .tooManySubscriptions:
            return RequestError("too_many_subscriptions", "you hold the most subscriptions allowed in this circle; unregister one first")
        }
    }
}
