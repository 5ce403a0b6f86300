import Glibc
import VigilCore

/// Reads the fields `StateWriter` writes, from a borrowed buffer, checking every length against
/// what is left: hostile or damaged bytes end in a thrown `StateError`, never a trap or an
/// allocation larger than the input.
///
/// The only type in the module that touches raw memory; callers lend it the buffer for the
/// length of one `withUnsafeBytes` call. `what` names the structure being read, for errors.
struct StateReader {
    let base: UnsafeRawBufferPointer
    private(set) var offset: Int
    var what: String

    init(_ base: UnsafeRawBufferPointer, offset: Int = 0, what: String) {
        self.base = base
        self.offset = offset
        self.what = what
    }

    var remaining: Int { base.count - offset }
    var isAtEnd: Bool { offset == base.count }

    func invalid(_ reason: String, at position: Int? = nil) -> StateError {
        .invalid(what: what, offset: position ?? offset, reason: reason)
    }

    @inline(__always) private mutating func need(_ n: Int) throws(StateError) {
        guard n <= base.count &- offset else { throw .truncated(what: what, offset: offset) }
    }

    @inline(__always) mutating func u8() throws(StateError) -> UInt8 {
        try need(1)
        defer { offset &+= 1 }
        return base[offset]
    }

    @inline(__always) mutating func u16() throws(StateError) -> UInt16 {
        try need(2)
        defer { offset &+= 2 }
        return UInt16(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inline(__always) mutating func u32() throws(StateError) -> UInt32 {
        try need(4)
        defer { offset &+= 4 }
        return UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always) mutating func u64() throws(StateError) -> UInt64 {
        try need(8)
        defer { offset &+= 8 }
        return UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always) mutating func i64() throws(StateError) -> Int64 { Int64(bitPattern: try u64()) }

    @inline(__always) mutating func f64() throws(StateError) -> Double { Double(bitPattern: try u64()) }

    /// 0 or 1; anything else is damage.
    mutating func bool() throws(StateError) -> Bool {
        let at = offset
        switch try u8() {
        case 0: return false
        case 1: return true
        case let b: throw invalid("flag byte \(b) is neither 0 nor 1", at: at)
        }
    }

    @inline(__always) mutating func word() throws(StateError) -> UInt64 {
        try need(8)
        defer { offset &+= 8 }
        return UInt64(bigEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// A time or seq field that must lie within ±2^53 (see `PanicStream.restorableMagnitude`).
    mutating func time() throws(StateError) -> Int64 {
        let at = offset
        let t = try i64()
        guard t >= -PanicStream.restorableMagnitude && t <= PanicStream.restorableMagnitude else {
            throw invalid("time \(t) is outside ±2^53 ms", at: at)
        }
        return t
    }

    /// A u32 element count, refused when `count * minimumElementBytes` exceeds what is left, so a
    /// damaged count cannot make the caller reserve gigabytes.
    mutating func count(of element: String, minimumElementBytes: Int) throws(StateError) -> Int {
        let at = offset
        let n = Int(try u32())
        guard n <= remaining / max(1, minimumElementBytes) else {
            throw invalid("\(element) count \(n) needs more bytes than the \(remaining) left", at: at)
        }
        return n
    }

    /// `n` bytes as they are (a fixed-size field: a key, a secret).
    mutating func bytes(_ n: Int) throws(StateError) -> [UInt8] {
        try need(n)
        defer { offset &+= n }
        return Array(UnsafeRawBufferPointer(rebasing: base[offset..<(offset &+ n)]))
    }

    /// A u32 byte count and that many bytes of valid UTF-8.
    ///
    /// `String(decoding:)` is the fast, specialised path (the generic `String(validating:)` costs
    /// twice as much, a third of a million-pin decode); it repairs invalid input instead of
    /// refusing it, so the result is compared with the input: they are equal exactly when the
    /// input was valid UTF-8, since valid input is copied as it is.
    mutating func string() throws(StateError) -> String {
        let at = offset
        let n = Int(try u32())
        guard n <= remaining else { throw .truncated(what: what, offset: at) }
        let bytes = UnsafeRawBufferPointer(rebasing: base[offset..<(offset &+ n)]).assumingMemoryBound(to: UInt8.self)
        var s = String(decoding: bytes, as: UTF8.self)
        let valid = s.withUTF8 { utf8 in
            utf8.count == n && (n == 0 || memcmp(utf8.baseAddress!, bytes.baseAddress!, n) == 0)
        }
        guard valid else { throw invalid("string is not valid UTF-8", at: at) }
        offset &+= n
        return s
    }

    mutating func pinID() throws(StateError) -> PinID {
        PinID(high: try word(), low: try word())
    }

    mutating func streamID() throws(StateError) -> StreamID {
        StreamID(high: try word(), low: try word())
    }

    mutating func digest() throws(StateError) -> TokenDigest {
        TokenDigest(words: (try word(), try word(), try word(), try word()))
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body with typed throws (the standard one rethrows `any Error`).
    func withStateBytes<R>(_ body: (UnsafeRawBufferPointer) throws(StateError) -> R) throws(StateError) -> R {
        let result: Result<R, StateError> = withUnsafeBytes { raw in
            Result { () throws(StateError) -> R in try body(raw) }
        }
        return try result.get()
    }
}
