// The hub fuzz target's input, read as the arguments of map operations (see HubFuzz.swift).
#if canImport(Glibc)
import Glibc
#endif
import VigilGeo

/// libFuzzer's bytes read front to back as operation arguments. Reading past the end gives zeros,
/// so every input is a valid script, and a short mutation changes one argument, not the framing.
///
/// Coordinates come from a selector byte: a small value picks an awkward one (a pole, the
/// antimeridian, the equator, a hair inside an edge); anything else reads 32 bits spread over the
/// range in steps of range / 2^32, which land exactly on geohash grid lines as well as between them.
/// Only values the request decoder accepts are made: the hub is never handed anything else.
struct HubScript {
    let bytes: UnsafeBufferPointer<UInt8>
    private var at = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { at >= bytes.count }

    mutating func byte() -> UInt8 {
        defer { at += 1 }
        return at < bytes.count ? bytes[at] : 0
    }

    /// `count` bytes, big-endian.
    mutating func word(_ count: Int) -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<count { value = value << 8 | UInt64(byte()) }
        return value
    }

    mutating func latitude() -> Double {
        coordinate(span: 180, awkward: [-90, 90, 0, -89.999_999_9, 89.999_999_9, 1e-9, -1e-9, 45])
    }

    mutating func longitude() -> Double {
        coordinate(span: 360, awkward: [-180, 180, 0, -179.999_999_9, 179.999_999_9, 1e-9, -1e-9, 90])
    }

    mutating func point() -> GeoPoint {
        GeoPoint(lat: latitude(), lon: longitude())
    }

    /// A box (south <= north, any west and east: crossing the antimeridian when west > east) or a
    /// circle of 1 m to 20,000 km (the decoder's limit), on a log scale so street-sized and
    /// continent-sized circles are equally likely.
    mutating func area() -> GeoArea {
        if byte() & 1 == 0 {
            let a = latitude(), b = latitude()
            return .box(GeoBox(south: min(a, b), west: longitude(), north: max(a, b), east: longitude()))
        }
        let center = point()
        let radius = min(20_000_000, pow(10, Double(word(2)) / 65_535 * 7.31))
        return .circle(center: center, radiusMeters: radius)
    }

    private mutating func coordinate(span: Double, awkward: [Double]) -> Double {
        let selector = byte()
        if selector < 16 { return awkward[Int(selector) % awkward.count] }
        return -span / 2 + span * Double(word(4)) / 4_294_967_296
    }
}
