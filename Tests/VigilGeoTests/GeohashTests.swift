import Testing
import VigilGeo
import VigilTestSupport

/// Published vectors, edge conventions, and agreement with the textbook bisection definition.
struct GeohashTests {
    struct Vector: Sendable, CustomStringConvertible {
        let lat: Double
        let lon: Double
        let hash: String
        var description: String { "(\(lat), \(lon)) → \(hash)" }
    }

    static let vectors: [Vector] = [
        // geohash.org's announcement example (also on Wikipedia).
        Vector(lat: 57.64911, lon: 10.40744, hash: "u4pruydqqvj"),
        // Wikipedia's worked example.
        Vector(lat: 42.6, lon: -5.6, hash: "ezs42"),
        Vector(lat: -25.382708, lon: -49.265506, hash: "6gkzwgjzn820"),
        // Corners and origin: edges belong to the cell north/east of them, 90/180 to the last.
        Vector(lat: 90, lon: 180, hash: "zzzzzzzzzzzz"),
        Vector(lat: -90, lon: -180, hash: "000000000000"),
        Vector(lat: 0, lon: 0, hash: "s00000000000"),
        Vector(lat: 90, lon: -180, hash: "bpbpbpbpbpbp"),
        Vector(lat: -90, lon: 180, hash: "pbpbpbpbpbpb"),
    ]

    @Test(arguments: vectors)
    func publishedVectors(_ v: Vector) {
        let p = GeoPoint(lat: v.lat, lon: v.lon)
        #expect(Geohash.encode(p, precision: v.hash.count) == v.hash)
        #expect(Geohash.cell(p, precision: v.hash.count) == GeohashCell(v.hash))
        // Every prefix is the encoding at the shorter precision.
        for precision in 1...v.hash.count {
            #expect(Geohash.encode(p, precision: precision) == String(v.hash.prefix(precision)))
        }
    }

    @Test func decodeEzs42() throws {
        let (box, center) = try #require(Geohash.decode("ezs42"))
        #expect(abs(center.lat - 42.605) < 0.001)
        #expect(abs(center.lon - -5.603) < 0.001)
        #expect(abs(box.south - 42.583) < 0.001 && abs(box.north - 42.627) < 0.001)
        #expect(abs(box.west - -5.625) < 0.001 && abs(box.east - -5.581) < 0.001)
        #expect(box.contains(GeoPoint(lat: 42.6, lon: -5.6)))
        #expect(Geohash.decode("ezs4a") == nil)
        #expect(Geohash.decode("") == nil)
    }

    @Test func decodeOfEncodeContainsThePoint() throws {
        var rng = SplitMix64(state: 6)
        for _ in 0..<3_000 {
            let p = GeoPoint(lat: Double.random(in: -90...90, using: &rng), lon: Double.random(in: -180...180, using: &rng))
            let precision = Int.random(in: 1...Geohash.maxPrecision, using: &rng)
            let hash = Geohash.encode(p, precision: precision)
            let (box, _) = try #require(Geohash.decode(hash))
            #expect(box.contains(p), "\(p) → \(hash) box \(box)")
        }
    }

    /// The definition, written as bisection: for each bit, compare with the midpoint of the
    /// current interval (>= goes to the upper half), longitude first.
    static func bisectionHash(_ p: GeoPoint, precision: Int) -> String {
        let alphabet = Array("0123456789bcdefghjkmnpqrstuvwxyz")
        var lon = (-180.0, 180.0)
        var lat = (-90.0, 90.0)
        var result = ""
        var value = 0
        for bit in 0..<(5 * precision) {
            let upper: Bool
            if bit % 2 == 0 {
                let mid = (lon.0 + lon.1) / 2
                upper = p.lon >= mid
                if upper { lon.0 = mid } else { lon.1 = mid }
            } else {
                let mid = (lat.0 + lat.1) / 2
                upper = p.lat >= mid
                if upper { lat.0 = mid } else { lat.1 = mid }
            }
            value = value << 1 | (upper ? 1 : 0)
            if bit % 5 == 4 {
                result.append(alphabet[value])
                value = 0
            }
        }
        return result
    }

    @Test func agreesWithBisectionIncludingOnAndNearEdges() {
        var rng = SplitMix64(state: 7)
        for _ in 0..<3_000 {
            var lat = Double.random(in: -90...90, using: &rng)
            var lon = Double.random(in: -180...180, using: &rng)
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: break
            case 1: // exactly on grid lines
                lat = GeoSampling.gridLine(origin: -90, span: 180, using: &rng)
                lon = GeoSampling.gridLine(origin: -180, span: 360, using: &rng)
            case 2: // one ulp below grid lines
                lat = Swift.max(-90, GeoSampling.gridLine(origin: -90, span: 180, using: &rng).nextDown)
                lon = Swift.max(-180, GeoSampling.gridLine(origin: -180, span: 360, using: &rng).nextDown)
            default: // tiny magnitudes around the central lines
                lat = Double.random(in: -1e-15...1e-15, using: &rng)
                lon = Double.random(in: -1e-15...1e-15, using: &rng)
            }
            let p = GeoPoint(lat: lat, lon: lon)
            let precision = Int.random(in: 1...Geohash.maxPrecision, using: &rng)
            #expect(Geohash.encode(p, precision: precision) == Self.bisectionHash(p, precision: precision), "\(p) at \(precision)")
        }
    }

    @Test func encodingIsLowerCase() {
        let hash = Geohash.encode(GeoPoint(lat: 57.64911, lon: 10.40744), precision: 12)
        #expect(hash == hash.lowercased())
        #expect(Geohash.decode(hash.uppercased())?.box == Geohash.decode(hash)?.box)
    }
}
