import VigilCore
import VigilGeo

/// The binary form of a pin, shared by snapshots and `pinPut` journal records:
///
///     id              16 bytes (UUID bytes)
///     lat, lon        f64, f64
///     createdAt, updatedAt, expiresAt   i64 ×3 (unix ms)
///     sequence        u64 (creation order)
///     up, down        u32, u32
///     editDigest      32 bytes
///     title, description, category      string ×3 (u32 length + UTF-8)
///     votes           u32 count, then count × (session u64, value i8 = ±1), sessions ascending
///
/// A pin's reach (`range_m`) follows these fields where the format has it (`writeRange`): in
/// snapshots since version 3, and in `pinPut` journal records of kind 10.
///
/// The geohash cell is not stored: it is a function of the point and recomputed on decode.
enum PinFields {
    /// The bytes of a pin with empty strings and no votes: the smallest a pin can be.
    static let minimumBytes = 16 + 16 + 24 + 8 + 8 + 32 + 3 * 4 + 4
    static let voteBytes = 9
    static let rangeBytes = 4

    /// Exact encoded size, to reserve a buffer once (String.utf8.count is O(1) for native strings).
    static func size(_ pin: Pin) -> Int {
        minimumBytes + rangeBytes + pin.title.utf8.count + pin.description.utf8.count + pin.category.utf8.count + pin.votes.count * voteBytes
    }

    static func write(_ pin: Pin, to w: inout StateWriter) {
        w.pinID(pin.id)
        w.f64(pin.point.lat)
        w.f64(pin.point.lon)
        w.i64(pin.createdAt)
        w.i64(pin.updatedAt)
        w.i64(pin.expiresAt)
        w.u64(pin.sequence)
        w.u32(UInt32(clamping: pin.up))
        w.u32(UInt32(clamping: pin.down))
        w.digest(pin.editDigest)
        w.string(pin.title)
        w.string(pin.description)
        w.string(pin.category)
        w.u32(UInt32(truncatingIfNeeded: pin.votes.count))
        if pin.votes.isEmpty { return }
        // Sorted, so equal pins give equal bytes (dictionary order varies from run to run).
        for (session, value) in pin.votes.sorted(by: { $0.key < $1.key }) {
            w.u64(session)
            w.u8(UInt8(bitPattern: value))
        }
    }

    /// The reach: u32 metres, 0 for none.
    static func writeRange(_ pin: Pin, to w: inout StateWriter) {
        w.u32(UInt32(clamping: pin.rangeMeters ?? 0))
    }

    /// The reach `writeRange` wrote; `required`: 0 (none) is damage (a journal record of kind 10
    /// exists only for a pin with a range).
    static func readRange(_ r: inout StateReader, required: Bool = false) throws(StateError) -> Int? {
        let at = r.offset
        let meters = try r.u32()
        if meters == 0 {
            if required { throw r.invalid("a pin record with a range has range 0", at: at) }
            return nil
        }
        return Int(meters)
    }

    static func read(from r: inout StateReader) throws(StateError) -> Pin {
        let start = r.offset
        let id = try r.pinID()
        let point = GeoPoint(lat: try r.f64(), lon: try r.f64())
        guard point.isValid else { throw r.invalid("pin \(id) has coordinates out of range", at: start + 16) }
        let createdAt = try r.time()
        let updatedAt = try r.time()
        let expiresAt = try r.time()
        let sequence = try r.u64()
        let up = Int(try r.u32())
        let down = Int(try r.u32())
        let editDigest = try r.digest()
        let title = try r.string()
        let description = try r.string()
        let category = try r.string()
        let voteCount = try r.count(of: "vote", minimumElementBytes: voteBytes)
        var votes: [UInt64: Int8] = [:]
        if voteCount > 0 {
            votes.reserveCapacity(voteCount)
            var previous: UInt64?
            for _ in 0..<voteCount {
                let at = r.offset
                let session = try r.u64()
                let value = Int8(bitPattern: try r.u8())
                guard value == 1 || value == -1 else { throw r.invalid("vote value \(value) is not ±1", at: at + 8) }
                // Strictly ascending: no session twice, and one canonical form per pin.
                if let previous, session <= previous { throw r.invalid("vote sessions are not strictly ascending", at: at) }
                previous = session
                votes[session] = value
            }
        }
        var pin = Pin(id: id, point: point, title: title, description: description, category: category,
                      createdAt: createdAt, expiresAt: expiresAt, editDigest: editDigest)
        pin.updatedAt = updatedAt
        pin.up = up
        pin.down = down
        pin.votes = votes
        pin.sequence = sequence
        return pin
    }
}
