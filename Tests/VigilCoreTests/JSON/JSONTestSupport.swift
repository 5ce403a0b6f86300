@testable import VigilCore
import VigilTestSupport

/// Helpers shared by the JSON tests: parse shorthands and a random value generator.
enum JSONTestSupport {
    static func parse(_ text: String, maxDepth: Int = 32) throws -> JSONValue {
        try JSONParser.parse(Array(text.utf8), maxDepth: maxDepth)
    }

    /// The error for a rejected input, nil if it was accepted.
    static func error(_ bytes: [UInt8], maxDepth: Int = 32) -> JSONError? {
        do {
            _ = try JSONParser.parse(bytes, maxDepth: maxDepth)
            return nil
        } catch {
            return error
        }
    }

    static func error(_ text: String, maxDepth: Int = 32) -> JSONError? {
        error(Array(text.utf8), maxDepth: maxDepth)
    }

    static func written(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        writer.value(value)
        return writer.bytes
    }

    /// Structural equality that also compares numbers bit for bit (so -0 differs from 0), which is
    /// stricter than `==` and proves the shortest-digits output parses back to the same Double.
    static func identical(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)): return x.bitPattern == y.bitPattern
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { identical($0, $1) }
        case (.object(let x), .object(let y)):
            return x.members.count == y.members.count
                && zip(x.members, y.members).allSatisfy { $0.key == $1.key && identical($0.value, $1.value) }
        default: return a == b
        }
    }
}

/// Random JSON values that stress the codec: strings mixing control characters, quotes,
/// backslashes, 2-, 3- and 4-byte UTF-8 and U+2028; numbers from integers, short decimals and
/// arbitrary finite bit patterns (subnormals included); objects with unique keys.
struct RandomJSON {
    var rng: SplitMix64

    mutating func value(depth: Int) -> JSONValue {
        let pick = Int.random(in: 0..<(depth > 0 ? 9 : 6), using: &rng)
        switch pick {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2, 3: return .number(number())
        case 4, 5: return .string(string())
        case 6, 7:
            return .array((0..<Int.random(in: 0...5, using: &rng)).map { _ in value(depth: depth - 1) })
        default:
            var members: [(String, JSONValue)] = []
            var seen = Set<String>()
            for _ in 0..<Int.random(in: 0...5, using: &rng) {
                let key = string()
                // Set uses Swift string equality, the same the parser's duplicate check uses.
                guard seen.insert(key).inserted else { continue }
                members.append((key, value(depth: depth - 1)))
            }
            return .object(JSONObject(members))
        }
    }

    mutating func number() -> Double {
        switch Int.random(in: 0..<5, using: &rng) {
        case 0: return Double(Int64.random(in: -(1 << 53)...(1 << 53), using: &rng))
        case 1: return Double(Int.random(in: -10_000_000...10_000_000, using: &rng)) / 100
        case 2: return [0.0, -0.0, 1.0, -1.0, 0.1, .leastNonzeroMagnitude, 1e308, 2.2250738585072014e-308][Int.random(in: 0..<8, using: &rng)]
        default:
            while true {
                let d = Double(bitPattern: rng.next())
                if d.isFinite { return d }
            }
        }
    }

    mutating func string() -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            let value: UInt32
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: value = UInt32.random(in: 0..<0x20, using: &rng)
            case 1: value = [0x22, 0x5C, 0x2F, 0x7F, 0x2028, 0x2029][Int.random(in: 0..<6, using: &rng)]
            case 2: value = UInt32.random(in: 0x80..<0x800, using: &rng)
            case 3: value = UInt32.random(in: 0x800..<0xD800, using: &rng)
            case 4: value = UInt32.random(in: 0xE000...0xFFFF, using: &rng)
            case 5: value = UInt32.random(in: 0x10000...0x10FFFF, using: &rng)
            default: value = UInt32.random(in: 0x20..<0x7F, using: &rng)
            }
            scalars.append(Unicode.Scalar(value)!)
        }
        return String(scalars)
    }
}
