/// An incremental, fail-fast UTF-8 validator (RFC 3629 §4) built as a DFA.
///
/// Bytes can be fed in any split; a code point cut between two `feed` calls is
/// carried in the state. The validator rejects overlong forms (C0, C1, E0 80-9F,
/// F0 80-8F), UTF-16 surrogates (ED A0-BF), code points above U+10FFFF (F4 90-BF,
/// F5-FF) and stray continuation bytes, at the first byte that makes the input
/// impossible to complete, not at the end.
///
/// The state is one byte, so the validator can live inside every connection.
public struct UTF8Validator: Sendable {
    // DFA states. Only `accept` is a code point boundary; `reject` is absorbing.
    @usableFromInline static let accept: UInt8 = 0
    @usableFromInline static let reject: UInt8 = 1
    // 2 = one tail byte (80-BF) left, 3 = two left, 4 = three left,
    // 5 = after E0 (next must be A0-BF), 6 = after ED (80-9F),
    // 7 = after F0 (90-BF), 8 = after F4 (80-8F).

    @usableFromInline var state: UInt8

    public init() {
        state = UTF8Validator.accept
    }

    /// True when the bytes fed so far end on a code point boundary (and are valid).
    @inlinable
    public var isAtBoundary: Bool { state == UTF8Validator.accept }

    /// Forgets everything, ready for a new message.
    @inlinable
    public mutating func reset() {
        state = UTF8Validator.accept
    }

    /// Whole-buffer check: valid UTF-8 that also ends on a boundary.
    public static func validate(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var validator = UTF8Validator()
        return validator.feed(bytes) && validator.isAtBoundary
    }

    /// Feeds the next bytes. Returns false as soon as the input is invalid; once
    /// false, it stays false until `reset`.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var s = state
        if s == UTF8Validator.reject { return false }
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var i = 0
        while i < count {
            if s == UTF8Validator.accept {
                // ASCII fast path: at a boundary, skip 8 bytes at a time while no
                // byte has its high bit set. Unaligned loads are fine on raw pointers.
                while i &+ 8 <= count {
                    let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    if word & 0x8080_8080_8080_8080 != 0 { break }
                    i &+= 8
                }
                while i < count && base.load(fromByteOffset: i, as: UInt8.self) < 0x80 {
                    i &+= 1
                }
                if i == count { break }
            }
            let byte = base.load(fromByteOffset: i, as: UInt8.self)
            s = UTF8Validator.transition(s, byte)
            if s == UTF8Validator.reject {
                state = s
                return false
            }
            i &+= 1
        }
        state = s
        return true
    }

    /// Next state. Each byte class has a row holding the next state for all nine
    /// states, 4 bits per state (state n in bits 4n..<4n+4), so a transition is one
    /// class lookup, a shift and a mask. Rows derived from the RFC 3629 §4 grammar;
    /// `UTF8ValidatorTests` checks them against Swift's decoder.
    @inlinable @inline(__always)
    static func transition(_ state: UInt8, _ byte: UInt8) -> UInt8 {
        let row: UInt64
        switch byte {
        case 0x00...0x7F: row = 0x1_1111_1110 // ASCII: only valid at a boundary
        case 0x80...0x8F: row = 0x3_1213_2011 // tail; ok after ED, F4; not after E0, F0
        case 0x90...0x9F: row = 0x1_3213_2011 // tail; ok after ED, F0; not after E0, F4
        case 0xA0...0xBF: row = 0x1_3123_2011 // tail; ok after E0, F0; not after ED, F4
        case 0xC2...0xDF: row = 0x1_1111_1112 // 2-byte lead
        case 0xE0: row = 0x1_1111_1115
        case 0xE1...0xEC, 0xEE, 0xEF: row = 0x1_1111_1113
        case 0xED: row = 0x1_1111_1116
        case 0xF0: row = 0x1_1111_1117
        case 0xF1...0xF3: row = 0x1_1111_1114
        case 0xF4: row = 0x1_1111_1118
        default: row = 0x1_1111_1111 // C0, C1 (always overlong), F5-FF (beyond U+10FFFF)
        }
        return UInt8(truncatingIfNeeded: (row &>> (UInt64(state) &<< 2)) & 0xF)
    }
}
