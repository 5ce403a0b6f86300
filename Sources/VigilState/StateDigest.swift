import COpenSSL
import VigilCore

/// A digest of the durable state a node holds: two nodes (or a node and its state directory)
/// holding the same pins, panic streams and check-in circles report the same digest, and any
/// difference in that state changes it. The cluster compares nodes by it (docs/CLUSTER.md).
///
/// What it covers is what a snapshot keeps, field for field, in the snapshot's own encoding
/// (`PinFields`, `PanicFields`, `CircleFields`): a field added to the snapshot is covered without
/// a change here. Pins with every field and their votes (sorted by voter), `range_m`, expiry and
/// creation sequence; streams with their status, times, note, end, token digests (owner and
/// watch, in issue order), history window and capacity, safety timer, escalation and circle; circles
/// with their members, requests, answer, home safe and subscriptions. Not covered, because they are not durable
/// or differ between nodes that agree: connections (owners, watchers, listeners, subscriptions),
/// the pins' cached JSON and cells, cluster counts, address budgets, armed timers, when a
/// snapshot was taken, and a stream's "watchers were told of the silence" flag (each node's own
/// clock sets it, and no record carries it).
///
/// Time: the digest is taken at a given `now`, and leaves out what is gone by then although a node
/// may still hold it until its next tick: pins at or past `expires_at`, ended streams whose grace
/// (`panic.ended_grace_ms`) is over, circles idle past `checkin.idle_lifetime_ms`, and a home safe
/// past its `until` (read as none). So nodes that sweep at different ticks, and a restore (which
/// drops the same things), agree.
///
/// How: each entity's bytes, after a kind byte, are hashed with SHA-256, and the hashes are added
/// as 256-bit numbers (mod 2^256). Addition does not depend on order, so the hubs' dictionaries are
/// walked as they are, unsorted, and no copy is made; entities are distinct (one per id), so
/// nothing cancels out. The digest is SHA-256 over a version tag, the three counts and that sum.
/// It is a check that nodes converged, not a security boundary: someone who can choose many pins'
/// contents could in principle search for a set of pins whose sums collide.
///
/// Cost: one encode and one SHA-256 of about 150 bytes per pin, in one pass (docs/OPERATIONS.md
/// has the measured figures, `vigil-bench state-digest`).
public struct StateDigest: Equatable, Sendable, CustomStringConvertible {
    /// The SHA-256 digest, 32 bytes.
    public let bytes: [UInt8]
    public let pins: Int
    public let streams: Int
    public let circles: Int

    /// The digest in lowercase hex (64 characters).
    public var hex: String {
        Hex.lowercase(bytes)
    }

    public var description: String { "\(hex) (\(pins) pins, \(streams) streams, \(circles) circles)" }

    /// What decides which entities are gone at `now`: the clock, and the two settings that set a
    /// deadline not stored with the entity. Nodes of one cluster must share the settings.
    public struct Rules: Sendable {
        public var now: Int64
        public var endedGraceMs: Int64
        public var circleIdleLifetimeMs: Int64

        public init(now: Int64, endedGraceMs: Int64, circleIdleLifetimeMs: Int64) {
            self.now = now
            self.endedGraceMs = endedGraceMs
            self.circleIdleLifetimeMs = circleIdleLifetimeMs
        }

        public init(now: Int64, panic: PanicSettings, checkin: CheckinSettings) {
            self.init(now: now, endedGraceMs: panic.endedGraceMs, circleIdleLifetimeMs: checkin.idleLifetimeMs)
        }
    }

    /// The state of live hubs at `rules.now`.
    public static func of(map: MapHub, panic: PanicHub, checkin: CheckinHub, rules: Rules) -> StateDigest {
        var d = Accumulator(rules)
        for pin in map.store.pins.values { d.add(pin) }
        for stream in panic.exportStreams() { d.add(stream) }
        for circle in checkin.exportCircles() { d.add(circle) }
        return d.finish()
    }

    /// The state an image restores to at `rules.now` (see `StateImage.restore`).
    public static func of(image: StateImage, rules: Rules) -> StateDigest {
        var d = Accumulator(rules)
        for pin in image.pins.values { d.add(pin) }
        for stream in image.streams.values { d.add(stream) }
        for circle in image.circles.values { d.add(circle) }
        return d.finish()
    }

    /// The state a snapshot holds, at `rules.now`.
    public static func of(snapshot: StateSnapshot, rules: Rules) -> StateDigest {
        var d = Accumulator(rules)
        for pin in snapshot.pins { d.add(pin) }
        for stream in snapshot.streams { d.add(stream) }
        for circle in snapshot.circles { d.add(circle) }
        return d.finish()
    }

    /// Entities in any order, then `finish`.
    public struct Accumulator {
        let rules: Rules
        private var sum: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        private var pins = 0, streams = 0, circles = 0
        /// One buffer for every entity's bytes, emptied (capacity kept) before each.
        private var w = StateWriter(capacity: 4096)

        /// Kind bytes: an entity's bytes never read as another kind's.
        static let pinKind: UInt8 = 1, streamKind: UInt8 = 2, circleKind: UInt8 = 3
        /// Changes when what is hashed changes, so digests of different versions never compare equal.
        /// 2: streams hash their escalation's sent_at (snapshot version 6).
        /// 3: streams hash their check-in circle, circles their subscriptions (snapshot version 7).
        /// 4: streams hash their last position's kind and their e2e part (snapshot version 9).
        static let versionTag = Array("vigil state digest 4".utf8)

        public init(_ rules: Rules) {
            self.rules = rules
        }

        public mutating func add(_ pin: Pin) {
            guard pin.expiresAt > rules.now else { return }
            begin(Self.pinKind)
            PinFields.write(pin, to: &w)
            PinFields.writeRange(pin, to: &w)
            hashEntity()
            pins += 1
        }

        public mutating func add(_ stream: PanicStream) {
            if let end = stream.ended, PanicHub.saturatingSum(end.at, rules.endedGraceMs) <= rules.now { return }
            begin(Self.streamKind)
            PanicFields.write(stream, to: &w, staleNotified: false)
            hashEntity()
            streams += 1
        }

        public mutating func add(_ circle: CheckinCircle) {
            guard PanicHub.saturatingSum(circle.activeAt, rules.circleIdleLifetimeMs) > rules.now else { return }
            begin(Self.circleKind)
            if let home = circle.home, home.until <= rules.now {
                // Lapsed: restore and the hub's tick clear it, and neither journals that.
                let lapsed = CheckinCircle(id: circle.id, createdAt: circle.createdAt, activeAt: circle.activeAt,
                                           ownerDigest: circle.ownerTokenDigest, members: circle.members, nextMember: circle.nextMember,
                                           requests: circle.requests, answer: circle.answer, home: nil)
                CircleFields.write(lapsed, to: &w)
            } else {
                CircleFields.write(circle, to: &w)
            }
            CircleFields.writeSubscriptions(circle.subscriptions, to: &w)
            hashEntity()
            circles += 1
        }

        public func finish() -> StateDigest {
            var w = StateWriter(capacity: 128)
            w.bytes.append(contentsOf: Self.versionTag)
            w.u64(UInt64(pins))
            w.u64(UInt64(streams))
            w.u64(UInt64(circles))
            w.u64(sum.0)
            w.u64(sum.1)
            w.u64(sum.2)
            w.u64(sum.3)
            let digest = [UInt8](unsafeUninitializedCapacity: 32) { out, initialized in
                w.bytes.withUnsafeBufferPointer { vigil_sha256($0.baseAddress, $0.count, out.baseAddress) }
                initialized = 32
            }
            return StateDigest(bytes: digest, pins: pins, streams: streams, circles: circles)
        }

        private mutating func begin(_ kind: UInt8) {
            w.bytes.removeAll(keepingCapacity: true)
            w.u8(kind)
        }

        /// SHA-256 of the buffer, added to the sum as a 256-bit little-endian number.
        private mutating func hashEntity() {
            var h: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            withUnsafeMutableBytes(of: &h) { out in
                w.bytes.withUnsafeBufferPointer { vigil_sha256($0.baseAddress, $0.count, out.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
            }
            // The digest's bytes as four little-endian words, whatever the machine's byte order.
            var carry: UInt64
            (sum.0, carry) = Self.add(sum.0, UInt64(littleEndian: h.0), 0)
            (sum.1, carry) = Self.add(sum.1, UInt64(littleEndian: h.1), carry)
            (sum.2, carry) = Self.add(sum.2, UInt64(littleEndian: h.2), carry)
            (sum.3, _) = Self.add(sum.3, UInt64(littleEndian: h.3), carry)
        }

        @inline(__always)
        static func add(_ a: UInt64, _ b: UInt64, _ carry: UInt64) -> (UInt64, UInt64) {
            let (s1, o1) = a.addingReportingOverflow(b)
            let (s2, o2) = s1.addingReportingOverflow(carry)
            return (s2, (o1 ? 1 : 0) + (o2 ? 1 : 0))
        }
    }
}
