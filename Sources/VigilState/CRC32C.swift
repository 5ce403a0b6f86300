/// CRC-32C (Castagnoli, the iSCSI/ext4 polynomial 0x1EDC6F41, reflected 0x82F63B78), which
/// checksums every snapshot and journal record.
///
/// Chosen over zlib's CRC-32 for its better error detection on the record sizes we write, and
/// because hardware and other tools (ext4, iSCSI, LevelDB/RocksDB logs) use it, so a record can
/// be checked with standard tools. Computed slicing-by-8: eight 256-entry tables let the loop
/// fold 8 bytes per step with 8 independent lookups instead of one dependent lookup per byte
/// (1.4 GB/s in a release build here: a 194 MB snapshot of a million pins in 140 ms).
public enum CRC32C {
    /// Table `k` (entries `k*256 ..< k*256+256`) gives the CRC of a byte followed by `k` zero bytes.
    static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[n] = c
        }
        for n in 0..<256 {
            for k in 1..<8 {
                let previous = t[(k - 1) * 256 + n]
                t[k * 256 + n] = (previous >> 8) ^ t[Int(previous & 0xFF)]
            }
        }
        return t
    }()

    /// The CRC-32C of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// The CRC-32C of `bytes[range]`.
    public static func checksum(_ bytes: [UInt8], range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The CRC-32C of the bytes in `buffer`.
    public static func checksum(_ buffer: UnsafeRawBufferPointer) -> UInt32 {
        ~update(~0, buffer)
    }

    /// Folds `buffer` into a running (pre-inverted) register; `checksum` inverts in and out.
    static func update(_ register: UInt32, _ buffer: UnsafeRawBufferPointer) -> UInt32 {
        tables.withUnsafeBufferPointer { t in
            var crc = register
            var i = 0
            let count = buffer.count
            while i &+ 8 <= count {
                let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: i, as: UInt64.self)) ^ UInt64(crc)
                crc = t[7 &* 256 &+ Int(word & 0xFF)] ^ t[6 &* 256 &+ Int(word >> 8 & 0xFF)]
                    ^ t[5 &* 256 &+ Int(word >> 16 & 0xFF)] ^ t[4 &* 256 &+ Int(word >> 24 & 0xFF)]
                    ^ t[3 &* 256 &+ Int(word >> 32 & 0xFF)] ^ t[2 &* 256 &+ Int(word >> 40 & 0xFF)]
                    ^ t[1 &* 256 &+ Int(word >> 48 & 0xFF)] ^ t[Int(word >> 56)]
                i &+= 8
            }
            while i < count {
                crc = (crc >> 8) ^ t[Int((crc ^ UInt32(buffer[i])) & 0xFF)]
                i &+= 1
            }
            return crc
        }
    }

    /// The CRC-32C of `a` followed by `b`, from the CRC of each and the length of `b` (zlib's
    /// `crc32_combine`, for this polynomial): lets a file be checksummed as it is written in
    /// chunks even though its first bytes are only known at the end (`SnapshotFileWriter`).
    public static func combine(_ crcA: UInt32, _ crcB: UInt32, lengthB: Int) -> UInt32 {
        multiplyModP(xPowerTwoN(lengthB, 3), crcA) ^ crcB
    }

    /// a·b modulo the polynomial, both reflected (bit 31 is x^0).
    static func multiplyModP(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var m: UInt32 = 1 << 31
        var p: UInt32 = 0
        var b = b
        while true {
            if a & m != 0 {
                p ^= b
                if a & (m &- 1) == 0 { break }
            }
            m >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ 0x82F6_3B78 : b >> 1
        }
        return p
    }

    /// x^(n·2^k) modulo the polynomial.
    static func xPowerTwoN(_ n: Int, _ k: Int) -> UInt32 {
        var p: UInt32 = 1 << 31  // x^0
        var n = n, k = k
        while n > 0 {
            if n & 1 != 0 { p = multiplyModP(xPowerTwoNTable[k & 31], p) }
            n >>= 1
            k += 1
        }
        return p
    }

    /// Entry n is x^(2^n) modulo the polynomial.
    static let xPowerTwoNTable: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 32)
        var p: UInt32 = 1 << 30  // x^1
        t[0] = p
        for n in 1..<32 {
            p = multiplyModP(p, p)
            t[n] = p
        }
        return t
    }()
}
