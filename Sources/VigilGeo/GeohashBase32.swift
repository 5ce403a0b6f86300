/// The geohash alphabet: 32 symbols, digits and lower-case letters without a, i, l and o.
///
/// Decoding accepts upper case too (hashes typed or logged by people), encoding always produces
/// lower case, so a hash string is canonical once it has been through `GeohashCell`.
enum GeohashBase32 {
    /// Symbol for each 5-bit value, as ASCII bytes.
    static let symbols: [UInt8] = Array("0123456789bcdefghjkmnpqrstuvwxyz".utf8)

    /// 5-bit value for each ASCII byte, or `invalid`. Built from `symbols` so the two tables
    /// cannot disagree.
    static let values: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 128)
        for (value, symbol) in symbols.enumerated() {
            table[Int(symbol)] = UInt8(value)
            // Upper case: only letters have one, and for ASCII letters it is 0x20 lower.
            if symbol >= UInt8(ascii: "a") {
                table[Int(symbol - 0x20)] = UInt8(value)
            }
        }
        return table
    }()

    static let invalid: UInt8 = 0xFF

    /// The 5-bit value of an ASCII byte, or nil for anything outside the alphabet.
    static func value(of byte: UInt8) -> UInt8? {
        guard byte < 128 else { return nil }
        let value = values[Int(byte)]
        return value == invalid ? nil : value
    }
}
