import VigilCore

/// Byte-level lookups in the server's JSON text, for the load client's hot path.
///
/// The client reads hundreds of thousands of events a second and needs a handful of fields from
/// each (type, pin id, up, down, the description's stamp); a full parse would cost more than
/// the server spent producing the event. These scans rely on two facts:
/// - a key pattern that begins with `"` and contains `":` (like `"up":`) cannot occur inside a
///   JSON string, where every `"` is escaped as `\"`, so its first match is the real key;
/// - the server writes each object's keys in a fixed order (VigilCore's `ServerMessages`).
/// Everything here is bounds-checked: untrusted or truncated input yields nil, never a trap.
enum RawScan {
    /// The index just past the first occurrence of `pattern` in `bytes[from..<limit]`, or nil.
    static func indexAfter(_ pattern: StaticString, in bytes: UnsafeBufferPointer<UInt8>,
                           from: Int, limit: Int? = nil) -> Int? {
        let end = Swift.min(limit ?? bytes.count, bytes.count)
        let count = pattern.utf8CodeUnitCount
        guard count > 0, from >= 0 else { return nil }
        let p = pattern.utf8Start
        let first = p[0]
        var i = from
        while i + count <= end {
            if bytes[i] == first {
                var k = 1
                while k < count && bytes[i + k] == p[k] { k += 1 }
                if k == count { return i + count }
            }
            i += 1
        }
        return nil
    }

    /// The index of the first occurrence of `pattern` at or after `from` (before `limit`), or nil.
    static func indexOf(_ pattern: StaticString, in bytes: UnsafeBufferPointer<UInt8>,
                        from: Int, limit: Int? = nil) -> Int? {
        indexAfter(pattern, in: bytes, from: from, limit: limit).map { $0 - pattern.utf8CodeUnitCount }
    }

    /// Decimal digits at `index`: the value and the index after the last digit. Nil when there is
    /// no digit there or the number does not fit in a UInt64.
    static func unsigned(in bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> (value: UInt64, end: Int)? {
        var i = index
        var value: UInt64 = 0
        while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[i] - 0x30))
            if o1 || o2 { return nil }
            value = sum
            i += 1
        }
        return i > index ? (value, i) : nil
    }

    /// The unsigned integer value of the key `pattern` (e.g. `"up":`) in `bytes[from..<limit]`.
    static func unsignedField(_ pattern: StaticString, in bytes: UnsafeBufferPointer<UInt8>,
                              from: Int, limit: Int? = nil) -> UInt64? {
        guard let start = indexAfter(pattern, in: bytes, from: from, limit: limit) else { return nil }
        return unsigned(in: bytes, at: start)?.value
    }

    /// A hyphenated UUID (36 characters, either case) at `index`, as VigilCore's `PinID`.
    static func pinID(in bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> PinID? {
        guard index >= 0, index + 36 <= bytes.count else { return nil }
        return PinID(utf8: UnsafeBufferPointer(rebasing: bytes[index..<(index + 36)]))
    }

    /// Runs `body` on contiguous bytes: the collection's own storage when it has some (an array,
    /// a buffer pointer), else a copy.
    static func withBytes<C: Collection, R>(_ utf8: C, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R
    where C.Element == UInt8 {
        if let result = utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(utf8).withUnsafeBufferPointer(body)
    }

    /// The same for a raw buffer (what the connection layer hands over).
    static func withBytes<R>(_ raw: UnsafeRawBufferPointer, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body(raw.assumingMemoryBound(to: UInt8.self))
    }
}
