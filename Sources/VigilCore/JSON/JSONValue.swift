/// A parsed JSON value (RFC 8259 §3).
///
/// Every number is a `Double`, as in JavaScript: the wire format of the apps Vigil serves. Integers
/// beyond ±2^53 therefore lose precision; `int64` refuses them instead of returning a rounded value.
/// Strings compare with Swift's `==`, that is by canonical equivalence, not byte by byte.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// 2^53: the largest magnitude below which every integer is exactly representable as a Double.
    static let exactIntegerLimit: Double = 9_007_199_254_740_992

    /// The string, when this is a string.
    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number, when this is a number.
    public var double: Double? {
        if case .number(let d) = self { return d }
        return nil
    }

    /// The Boolean, when this is `true` or `false`.
    public var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The object, when this is an object.
    public var object: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The elements, when this is an array.
    public var array: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The number as an exact integer when it is integral and within ±2^53, else nil.
    /// `-0` gives `0`. `1.0` and `1e2` count as integers: JSON does not distinguish them from `1` and `100`.
    public var int64: Int64? {
        guard case .number(let d) = self else { return nil }
        // The bound check comes first so the conversion below can never trap; NaN fails it too.
        guard d >= -JSONValue.exactIntegerLimit && d <= JSONValue.exactIntegerLimit else { return nil }
        guard d.rounded(.towardZero) == d else { return nil }
        return Int64(d)
    }

    /// True for `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}
