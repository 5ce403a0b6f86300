import VigilCore

/// What the load client needs from one pin object in the server's JSON, read without parsing it.
public struct ScannedPin: Equatable, Sendable {
    /// Nil when the id is not a UUID (never from Vigil; a checker counts such pins as foreign).
    public var id: PinID?
    /// Nil when the description carries no stamp (a pin another client made).
    public var stamp: PayloadStamp?
    public var up: Int?
    public var down: Int?

    public init(id: PinID?, stamp: PayloadStamp?, up: Int?, down: Int?) {
        self.id = id
        self.stamp = stamp
        self.up = up
        self.down = down
    }

    /// The version index this state shows: moves + up + down (see `PayloadStamp`). Nil without a
    /// stamp or counts.
    public var observedVersion: Int? {
        guard let stamp, let up, let down else { return nil }
        return PayloadStamp.versionIndex(moves: stamp.moves, upPlusDown: up + down)
    }
}

/// One `pin.*` event, scanned.
public struct ScannedPinEvent: Equatable, Sendable {
    public var kind: PinEventKind
    public var pin: ScannedPin

    public init(kind: PinEventKind, pin: ScannedPin) {
        self.kind = kind
        self.pin = pin
    }

    /// When the op that caused this event was sent, if the event tells: for `added`, `updated`
    /// and `removed(moved)` whose up + down equals the stamp's votes, the stamp's time. A vote
    /// leaves the stamp of an older op (up + down is then larger), and `removed(deleted)` shows
    /// the state before the delete, so neither gives a send time.
    public var latencySendNs: UInt64? {
        switch kind {
        case .added, .updated, .removed(.moved):
            guard let stamp = pin.stamp, let up = pin.up, let down = pin.down,
                  up + down == stamp.votes else { return nil }
            return stamp.sendNs
        case .removed, .expired:
            return nil
        }
    }
}

/// Reads pin events and pin lists out of the server's JSON text by byte scanning (see `RawScan`
/// for why that is sound), for the hot path of the load client.
public enum PinEventScan {
    /// A `pin.added` / `pin.updated` / `pin.removed` / `pin.expired` event; nil for any other
    /// message (a reply, a panic event) or a malformed one.
    public static func event<C: Collection>(_ utf8: C) -> ScannedPinEvent? where C.Element == UInt8 {
        RawScan.withBytes(utf8) { event(in: $0) }
    }

    public static func event(_ raw: UnsafeRawBufferPointer) -> ScannedPinEvent? {
        RawScan.withBytes(raw) { event(in: $0) }
    }

    /// Every pin object in a message, in order (the `pins` of a subscribe reply, or the one `pin`
    /// of a create/update/vote reply), and whether the message says `"truncated":true`.
    public static func pins<C: Collection>(_ utf8: C) -> (pins: [ScannedPin], truncated: Bool) where C.Element == UInt8 {
        RawScan.withBytes(utf8) { pins(in: $0) }
    }

    public static func pins(_ raw: UnsafeRawBufferPointer) -> (pins: [ScannedPin], truncated: Bool) {
        RawScan.withBytes(raw) { pins(in: $0) }
    }

    // MARK: - Scanning

    static func event(in bytes: UnsafeBufferPointer<UInt8>) -> ScannedPinEvent? {
        guard let typeStart = RawScan.indexAfter("\"type\":\"pin.", in: bytes, from: 0) else { return nil }
        let kind: PinEventKind
        if matches("added\"", in: bytes, at: typeStart) {
            kind = .added
        } else if matches("updated\"", in: bytes, at: typeStart) {
            kind = .updated
        } else if matches("expired\"", in: bytes, at: typeStart) {
            kind = .expired
        } else if matches("removed\"", in: bytes, at: typeStart) {
            guard let reasonStart = RawScan.indexAfter("\"reason\":\"", in: bytes, from: typeStart) else { return nil }
            if matches("moved\"", in: bytes, at: reasonStart) {
                kind = .removed(.moved)
            } else if matches("deleted\"", in: bytes, at: reasonStart) {
                kind = .removed(.deleted)
            } else if matches("flagged\"", in: bytes, at: reasonStart) {
                kind = .removed(.flagged)
            } else {
                return nil
            }
        } else {
            return nil
        }
        guard let objectStart = RawScan.indexOf("{\"id\":\"", in: bytes, from: typeStart) else { return nil }
        return ScannedPinEvent(kind: kind, pin: pin(in: bytes, at: objectStart, limit: bytes.count))
    }

    static func pins(in bytes: UnsafeBufferPointer<UInt8>) -> (pins: [ScannedPin], truncated: Bool) {
        var result: [ScannedPin] = []
        var next = RawScan.indexOf("{\"id\":\"", in: bytes, from: 0)
        while let start = next {
            // Bound each pin's fields by the next pin object, so a pin missing a field can never
            // borrow its neighbour's.
            next = RawScan.indexOf("{\"id\":\"", in: bytes, from: start + 1)
            result.append(pin(in: bytes, at: start, limit: next ?? bytes.count))
        }
        let truncated = RawScan.indexAfter("\"truncated\":true", in: bytes, from: 0) != nil
        return (result, truncated)
    }

    /// The pin object starting at `start` (its `{"id":"`), with its fields looked up before `limit`.
    /// The server writes up and down after the description, so each search starts where the last
    /// one ended.
    private static func pin(in bytes: UnsafeBufferPointer<UInt8>, at start: Int, limit: Int) -> ScannedPin {
        let idStart = start + 7
        var id: PinID?
        if idStart + 37 <= limit, bytes[idStart + 36] == UInt8(ascii: "\"") {
            id = RawScan.pinID(in: bytes, at: idStart)
        }
        let stamp = PayloadStamp.scan(in: bytes, from: idStart, limit: limit)
        let up = RawScan.unsignedField("\"up\":", in: bytes, from: idStart, limit: limit)
        let down = RawScan.unsignedField("\"down\":", in: bytes, from: idStart, limit: limit)
        return ScannedPin(id: id, stamp: stamp,
                          up: up.flatMap { $0 <= UInt64(Int32.max) ? Int($0) : nil },
                          down: down.flatMap { $0 <= UInt64(Int32.max) ? Int($0) : nil })
    }

    private static func matches(_ literal: StaticString, in bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard index >= 0, index + count <= bytes.count else { return false }
        let p = literal.utf8Start
        for k in 0..<count where bytes[index + k] != p[k] { return false }
        return true
    }
}
