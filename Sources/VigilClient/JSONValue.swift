import Foundation

/// A JSON value as the protocol carries it: what the client sends, and any message it receives
/// before it is read into a typed model.
///
/// Numbers are kept as `Double` (every integer the protocol uses, Unix milliseconds included, is
/// exact in a double) and written back without a fraction when they are whole, so an integer
/// field such as `ttl_s` is sent as `60`, never `60.0`.
public enum JSONValue: Sendable, Hashable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object (member order is not kept).
    case object([String: JSONValue])

    /// Reads any JSON value.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let d = try? c.decode(Double.self) { self = .number(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        if let o = try? c.decode([String: JSONValue].self) { self = .object(o); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    /// Writes the value (whole numbers without a fraction).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let d):
            if let i = JSONValue.exactInteger(d) { try c.encode(i) } else { try c.encode(d) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    static func exactInteger(_ d: Double) -> Int64? {
        guard d.isFinite, d == d.rounded(), abs(d) < 9_007_199_254_740_992 else { return nil }
        return Int64(d)
    }

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The number, if this is one.
    public var doubleValue: Double? { if case .number(let d) = self { d } else { nil } }
    /// The number as a 64-bit integer (Unix milliseconds), if this is a whole number a double
    /// holds exactly; `nil` for anything else (never a trap on a hostile value such as `1e300`).
    public var int64Value: Int64? { if case .number(let d) = self { JSONValue.exactInteger(d) } else { nil } }
    /// The number as an integer, if this is a whole number.
    public var intValue: Int? { if case .number(let d) = self, let i = JSONValue.exactInteger(d) { Int(i) } else { nil } }
    /// The Boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The members, if this is an object.
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// Whether this is `null`.
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The member `key` of an object (`nil` for a missing member or a value that is no object).
    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// The value as compact JSON text (RFC 8259), members sorted by name.
    public var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let d):
            if let i = JSONValue.exactInteger(d) { out += String(i) } else if d.isFinite { out += "\(d)" } else { out += "null" }
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let a):
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case .object(let o):
            out += "{"
            for (i, k) in o.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(k, to: &out)
                out += ":"
                o[k]!.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        out += "\""
    }

    /// Reads JSON text; `nil` when it is not JSON.
    public static func parse(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// Reads this value as a `Decodable` model (snake_case keys become camelCase).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONValue.decoder.decode(T.self, from: Data(jsonText.utf8))
    }

    /// A model as a JSON value (camelCase keys become snake_case).
    public static func encode<T: Encodable>(_ value: T) -> JSONValue {
        guard let data = try? encoder.encode(value),
              let v = try? JSONDecoder().decode(JSONValue.self, from: data) else { return .null }
        return v
    }

    static var decoder: JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        return d
    }

    static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        return e
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An array literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// A dictionary literal (an object).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    /// `nil` is `null`.
    public init(nilLiteral: ()) { self = .null }
}

/// A JSON object: a protocol message, or the fields of a request.
public typealias JSONObject = [String: JSONValue]
