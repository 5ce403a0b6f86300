/// A circle's revision: the `base` a writer of the replicated log names for an edit, "the circle
/// as I validated the change against it" (docs/CLUSTER.md, "The replicated log (design)").
///
/// FNV-1a, 64 bits, over the durable fields in a fixed order, each length-prefixed or fixed-size,
/// so the same circle gives the same number on every node and in every process (Swift's `Hasher`
/// is seeded per process, so it cannot be used).
///
/// Home safe is left out on purpose: it lapses on each node's own clock (`CheckinHub.tick`), so
/// for a moment one node holds it and another does not, and a revision over it would make the
/// nodes disagree about whether a record applies. Every change also moves `activeAt` (to the
/// change's time, when that is later), so a change of home safe still changes the revision, unless
/// it came in the millisecond of the circle's last change (or from a clock behind it): the writer
/// should give a change a time past the circle's `activeAt`, as it gives a pin edit an `updatedAt`
/// past its base. If it does not, such a home change still applies (see
/// `CheckinHub.applyReplicatedPut`), but a change racing it is not seen as a conflict.
extension CheckinCircle {
    public var revision: UInt64 {
        var h = FNV1a64()
        h.add(id.high)
        h.add(id.low)
        h.add(createdAt)
        h.add(activeAt)
        for word in [ownerDigest.words.0, ownerDigest.words.1, ownerDigest.words.2, ownerDigest.words.3] { h.add(word) }
        h.add(UInt64(members.count))
        for m in members {
            h.add(UInt64(m.id))
            h.add(m.label)
            h.add(m.addedAt)
            for word in [m.digest.words.0, m.digest.words.1, m.digest.words.2, m.digest.words.3] { h.add(word) }
        }
        h.add(UInt64(nextMember))
        h.add(requests)
        if let answer {
            h.add(UInt8(1))
            h.add(answer.at)
            h.add(answer.note)
            h.add(answer.answered)
        } else {
            h.add(UInt8(0))
        }
        // Only when there are any, so a circle without subscriptions keeps the revision builds
        // before them gave it (nodes of a cluster upgraded one at a time still agree on it).
        if !subscriptions.isEmpty { h.add(subscriptions) }
        return h.value
    }
}

/// FNV-1a over 64 bits, fed whole little-endian words and length-prefixed strings.
struct FNV1a64 {
    private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    mutating func add(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
    }

    mutating func add(_ word: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { add(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
    }

    mutating func add(_ word: Int64) { add(UInt64(bitPattern: word)) }

    /// A marker (absent, present) then the length and the UTF-8 bytes.
    mutating func add(_ text: String?) {
        guard let text else { return add(UInt8(0)) }
        add(UInt8(1))
        add(UInt64(text.utf8.count))
        for byte in text.utf8 { add(byte) }
    }

    mutating func add(_ subscriptions: [CheckinSubscription]) {
        add(UInt64(subscriptions.count))
        for s in subscriptions {
            add(s.id.high)
            add(s.id.low)
            switch s.holder {
            case .owner: add(UInt64(0))
            case .member(let m): add(UInt64(m))
            }
            add(s.addedAt)
            switch s.target {
            case .webPush(let endpoint, let p256dh, let auth):
                add(UInt8(1))
                add(endpoint)
                for byte in p256dh + auth { add(byte) }
            case .relay(let handle):
                add(UInt8(2))
                add(handle)
            }
        }
    }

    mutating func add(_ asks: [CheckinAsk]) {
        add(UInt64(asks.count))
        for ask in asks {
            add(UInt64(ask.member))
            add(ask.label)
            add(ask.at)
        }
    }
}
