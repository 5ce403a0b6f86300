import VigilCore

/// Check-in circles in the inspector's lines. Member labels and notes are what people wrote:
/// printed only with `content`, else given as their size in bytes (like pin titles and notes).
/// Subscriptions are counted, by holder and kind, and never shown, not even with `content`: an
/// endpoint, its keys or a relay handle would let whoever reads the output reach the person.
extension InspectorLine {
    mutating func circle(_ c: CheckinCircle) {
        w.field("id", c.id.description)
        w.field("created_at", c.createdAt)
        w.field("active_at", c.activeAt)
        w.field("owner_digest", Self.shortDigest(c.ownerTokenDigest))
        w.field("next_member", Int64(c.nextMember))
        w.key("members")
        w.beginArray()
        for m in c.members {
            w.beginObject()
            w.field("member", Int64(m.id))
            label(m.label)
            w.field("added_at", m.addedAt)
            w.field("digest", Self.shortDigest(m.tokenDigest))
            w.endObject()
        }
        w.endArray()
        asks("requests", c.requests)
        w.key("answer")
        if let a = c.answer {
            w.beginObject()
            w.field("at", a.at)
            note(a.note)
            asks("answered", a.answered)
            w.endObject()
        } else {
            w.null()
        }
        w.key("home")
        if let h = c.home {
            w.beginObject()
            w.field("at", h.at)
            w.field("until", h.until)
            w.endObject()
        } else {
            w.null()
        }
        subscriptionCounts(c.subscriptions)
    }

    /// `"subscriptions":{"owner":{"web_push":N,"relay":N},"members":[{"member":M,"web_push":N,"relay":N},…]}`,
    /// members in number order, only those holding any.
    private mutating func subscriptionCounts(_ subscriptions: [CheckinSubscription]) {
        func counts(_ of: [CheckinSubscription], into w: inout JSONWriter) {
            var push = 0, relay = 0
            for s in of {
                if case .webPush = s.target { push += 1 } else { relay += 1 }
            }
            w.field("web_push", Int64(push))
            w.field("relay", Int64(relay))
        }
        w.key("subscriptions")
        w.beginObject()
        w.key("owner")
        w.beginObject()
        counts(subscriptions.filter { $0.holder == .owner }, into: &w)
        w.endObject()
        w.key("members")
        w.beginArray()
        var members = Set<UInt32>()
        for s in subscriptions { if case .member(let m) = s.holder { members.insert(m) } }
        for m in members.sorted() {
            w.beginObject()
            w.field("member", Int64(m))
            counts(subscriptions.filter { $0.holder == .member(m) }, into: &w)
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    private mutating func label(_ label: String?) {
        guard let label else { return }
        if content { w.field("label", label) } else { w.field("label_bytes", Int64(label.utf8.count)) }
    }

    private mutating func asks(_ name: StaticString, _ asks: [CheckinAsk]) {
        w.key(name)
        w.beginArray()
        for a in asks {
            w.beginObject()
            w.field("member", Int64(a.member))
            label(a.label)
            w.field("at", a.at)
            w.endObject()
        }
        w.endArray()
    }
}
