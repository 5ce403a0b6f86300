import Foundation

// End-to-end encrypted streams on the wire (docs/PROTOCOL.md, "End-to-end encrypted streams"):
// the watch side's opening of sealed points, and the owner's sealing with the seq it expects.

/// The key a watch opens an end-to-end encrypted stream's points with.
public enum E2EWatchKey: Sendable, Equatable {
    /// The stream key's 32 bytes (a direct contact's, from the watch link's `k`).
    case key([UInt8])
    /// A watch link's fragment (`s=…&t=…&k=…`): its `k`, or the notice that it has none.
    case fragment(String)
    /// A circle member's secret (`ms` of its invitation) and number: the key comes in the
    /// member's own box with the watch reply, and with each rekey.
    case member(secret: [UInt8], member: Int)
}

/// A sealed point that did not open (tampered, replayed under another seq or status, moved from
/// another stream, or the key is missing or wrong). It carries no position, ever.
public struct CannotDecrypt: Sendable, Equatable {
    /// What a page shows for it.
    public static let label = "cannot decrypt this update"
    /// The stream.
    public var stream: String
    /// The event's seq.
    public var seq: Int
    /// When the server took it (ms).
    public var at: Int64
    /// The key id it came with.
    public var kid: String
}

/// The one thing a watcher is told about its key, once (``WatchEvent/keyNotice(_:)``).
public enum E2EKeyNotice: String, Sendable, Equatable {
    /// No key (a link without `k`).
    case absent
    /// The link's key is damaged.
    case invalid
    /// The key opens none of the stream's points.
    case wrong
    /// The stream's key changed, and the watcher has no key for the new one.
    case rekeyed
    /// The member's box did not open with its secret.
    case box
    /// The stream holds no box for this member.
    case nobox
}

/// Opens a watched stream's sealed points: keys by kid (from boxes) and a default key, the one
/// notice about the key.
final class E2EOpener {
    var key: [UInt8]?
    var boxKeys: [String: StreamKey] = [:]
    var openedKids: Set<String> = []
    let memberSecret: [UInt8]?
    let member: Int?
    private(set) var notice: E2EKeyNotice?
    /// The notice set by the last call, to be said once.
    var pendingNotice: E2EKeyNotice?

    init(_ source: E2EWatchKey) {
        switch source {
        case .key(let bytes):
            key = bytes
            memberSecret = nil; member = nil
        case .fragment(let fragment):
            memberSecret = nil; member = nil
            switch E2E.key(fromFragment: fragment) {
            case .key(let bytes): key = bytes
            // Said when a sealed point comes (`open`): a clear stream needs no key.
            case .absent: break
            case .invalid: set(.invalid)
            }
        case .member(let secret, let member):
            memberSecret = secret
            self.member = member
        }
    }

    private func set(_ n: E2EKeyNotice?) {
        if n != notice { pendingNotice = n }
        notice = n
    }

    /// A member's box: opened under each of `kids` until one opens.
    func box(_ text: String?, kids: [String?]) {
        guard let memberSecret, let member else { return }
        guard let text else {
            if boxKeys.isEmpty { set(.nobox) }
            return
        }
        var seen = Set<String>()
        for case let kid? in kids where seen.insert(kid).inserted {
            if let k = try? E2E.unwrapForMember(text, memberSecret: memberSecret, kid: kid, member: UInt64(max(0, member))) {
                boxKeys[kid] = k
                if notice == .box || notice == .nobox { set(nil) }
                return
            }
        }
        set(.box)
    }

    /// The position in a sealed point (`sealed`, `kid`, `status`, with `seq`), or nil: never a
    /// position for one that does not open.
    func open(_ point: JSONObject, seq: Int) -> E2EPosition? {
        guard let sealed = point["sealed"]?.stringValue, let kid = point["kid"]?.stringValue,
              let status = point["status"]?.stringValue.flatMap(PanicStatus.init(rawValue:)), seq >= 0 else {
            return nil
        }
        let streamKey = boxKeys[kid] ?? key.flatMap { try? StreamKey(bytes: $0, kid: kid) }
        guard let streamKey else {
            if notice == nil { set(!openedKids.isEmpty ? .rekeyed : (memberSecret != nil ? .nobox : .absent)) }
            return nil
        }
        if let p = try? E2E.open(sealed, key: streamKey, seq: UInt64(seq), status: status) {
            openedKids.insert(kid)
            if notice == .wrong || notice == .rekeyed { set(nil) }
            return p
        }
        // Under a kid that opened before: this point was tampered with or replayed. Else the key is wrong for it.
        if !openedKids.contains(kid), notice == nil { set(openedKids.isEmpty ? .wrong : .rekeyed) }
        return nil
    }

    /// A notice set since the last call (said once), or nil.
    func takeNotice() -> E2EKeyNotice? {
        defer { pendingNotice = nil }
        return pendingNotice
    }

    static func isSealed(_ v: JSONValue?) -> Bool { v?.objectValue?["sealed"]?.stringValue != nil }

    /// A position's clear members, as a location event or trail point carries them.
    static func clearFields(_ p: E2EPosition) -> JSONObject {
        var o: JSONObject = ["lat": .number(p.lat), "lon": .number(p.lon)]
        if let a = p.accuracyM { o["accuracy_m"] = .number(a) }
        if let h = p.heading { o["heading"] = .number(h) }
        if let s = p.speedMps { o["speed_mps"] = .number(s) }
        return o
    }

    /// `msg` with its sealed members replaced by the opened position's, or nil when it does not open.
    func opened(_ msg: JSONObject, seq: Int) -> (JSONObject, E2EPosition)? {
        guard let p = open(msg, seq: seq) else { return nil }
        var o = msg
        for k in ["sealed", "kid", "status"] { o[k] = nil }
        o.merge(Self.clearFields(p)) { _, new in new }
        return (o, p)
    }
}

extension WatchRecord {
    /// A watch reply's state with its sealed points opened: the trail keeps the points that
    /// opened, `last` is the opened last point or nil; the seqs of the points that did not open.
    func openState(_ reply: JSONObject) -> (JSONValue?, [CannotDecrypt]) {
        guard var state = reply["state"]?.objectValue else { return (reply["state"], []) }
        let trail = state["trail"]?.arrayValue ?? []
        let sealedStream = state["e2e"]?.boolValue == true || E2EOpener.isSealed(state["last"]) || trail.contains { E2EOpener.isSealed($0) }
        guard sealedStream else { return (reply["state"], []) }
        let kids: [String?] = [state["kid"]?.stringValue, state["last"]?.objectValue?["kid"]?.stringValue]
            + trail.reversed().map { $0.objectValue?["kid"]?.stringValue }
        if opener.member != nil { opener.box(reply["box"]?.stringValue, kids: kids) }
        var failed: [CannotDecrypt] = []
        var kept: [JSONValue] = []
        for p in trail {
            guard let o = p.objectValue, let seq = o["seq"]?.intValue else { continue }
            if let (clear, _) = opener.opened(o, seq: seq) {
                kept.append(.object(clear))
            } else {
                failed.append(CannotDecrypt(stream: stream, seq: seq, at: o["at"]?.int64Value ?? 0, kid: o["kid"]?.stringValue ?? ""))
            }
        }
        state["trail"] = .array(kept)
        if let last = state["last"]?.objectValue {
            let seq = last["seq"]?.intValue
            if let seq, let (clear, _) = opener.opened(last, seq: seq) {
                state["last"] = .object(clear)
            } else if let trailLast = kept.last {
                state["last"] = trailLast
            } else {
                state["last"] = nil
            }
        }
        state["position_known"] = nil
        return (.object(state), failed)
    }

    /// A `panic.status` whose escalation's `last` is sealed: opened, or left out (never a position).
    func openStatus(_ msg: JSONObject) -> JSONObject {
        guard let last = msg["last"]?.objectValue, E2EOpener.isSealed(msg["last"]) else { return msg }
        var o = msg
        o["position_known"] = nil
        if let seq = last["seq"]?.intValue, let (clear, _) = opener.opened(last, seq: seq) {
            o["last"] = .object(clear)
        } else {
            o["last"] = nil
        }
        return o
    }

    func sayNotice() {
        if let n = opener.takeNotice() { events.yield(.keyNotice(n)) }
    }
}
