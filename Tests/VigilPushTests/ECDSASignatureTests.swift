import COpenSSL
import Testing
@testable import VigilPush

/// DER ↔ raw r ‖ s: OpenSSL's own signatures both ways (checked against libcrypto's DER reader),
/// short r and s that need left padding, and every malformed DER shape refused.
@Suite struct ECDSASignatureTests {
    /// r and s as libcrypto's DER reader sees them, padded to 32 bytes each: an independent reading.
    func opensslRaw(_ der: [UInt8]) -> [UInt8]? {
        var cursor: UnsafePointer<UInt8>? = nil
        return der.withUnsafeBufferPointer { buffer -> [UInt8]? in
            cursor = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else { return nil }
            defer { ECDSA_SIG_free(signature) }
            var r = [UInt8](repeating: 0, count: 32), s = [UInt8](repeating: 0, count: 32)
            guard BN_bn2binpad(ECDSA_SIG_get0_r(signature), &r, 32) == 32, BN_bn2binpad(ECDSA_SIG_get0_s(signature), &s, 32) == 32 else { return nil }
            return r + s
        }
    }

    @Test func openSSLSignaturesConvertBothWays() throws {
        let key = try P256PrivateKey.generate()
        var shortIntegers = 0, paddedIntegers = 0, signatures = 0
        // Until a short r or s (top byte zero: 1 in 128 per signature) has been seen, at least 300.
        while signatures < 300 || shortIntegers == 0 {
            #expect(signatures < 20_000, "no short r or s in 20,000 signatures")
            if signatures >= 20_000 { break }
            let message = Array("message \(signatures)".utf8)
            let der = try key.signatureDER(of: message)
            let raw = try ECDSASignature.raw(der: der)
            #expect(raw.count == 64)
            #expect(raw == opensslRaw(der))
            #expect(try ECDSASignature.der(raw: raw) == der)
            #expect(try TestKeys.verifies(der: ECDSASignature.der(raw: raw), message: message, key: key.publicKey))
            if raw[0] == 0 || raw[32] == 0 { shortIntegers += 1 }
            if der[3] == 33 { paddedIntegers += 1 }
            signatures += 1
        }
        #expect(paddedIntegers > 0, "no r with its top bit set, so no 33-byte INTEGER was seen")
    }

    @Test func shortIntegersAreLeftPadded() throws {
        // r = 1, s = 31 bytes of 0x7F: minimal DER, both shorter than 32 bytes.
        let s = [UInt8](repeating: 0x7F, count: 31)
        let der: [UInt8] = [0x30, 3 + 2 + 31, 0x02, 0x01, 0x01, 0x02, 31] + s
        let raw = try ECDSASignature.raw(der: der)
        #expect(raw == [UInt8](repeating: 0, count: 31) + [1] + [0] + s)
        #expect(raw == opensslRaw(der))
        #expect(try ECDSASignature.der(raw: raw) == der)
        // The top bit set needs the sign byte, however short the number.
        let high: [UInt8] = [0x30, 6, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01]
        var rawHigh = try ECDSASignature.raw(der: high)
        rawHigh[63] = 0x80
        #expect(try ECDSASignature.der(raw: rawHigh) == [0x30, 7, 0x02, 0x01, 0x01, 0x02, 0x02, 0x00, 0x80])
    }

    @Test func malformedDERIsRefused() {
        let one: [UInt8] = [0x02, 0x01, 0x01]
        let cases: [[UInt8]] = [
            [],
            [0x30],
            [0x31, 6] + one + one,                      // not a SEQUENCE
            [0x30, 0x81, 6] + one + one,                // long-form length
            [0x30, 7] + one + one,                      // length says more than there is
            [0x30, 7] + one + one + [0],                // a byte after the INTEGERs
            [0x30, 3] + one,                            // one INTEGER
            [0x30, 6, 0x03, 0x01, 0x01] + one,          // not an INTEGER
            [0x30, 6, 0x02, 0x01, 0x80] + one,          // negative
            [0x30, 7, 0x02, 0x02, 0x00, 0x01] + one,    // non-minimal leading zero
            [0x30, 6, 0x02, 0x01, 0x00] + one,          // zero
            [0x30, 5, 0x02, 0x00] + one,                // empty INTEGER
            [0x30, 6, 0x02, 0x05, 0x01] + one,          // INTEGER longer than the SEQUENCE
            [0x30, 3 + 2 + 33, 0x02, 33] + [UInt8](repeating: 0x11, count: 33) + one,  // 33 bytes, no sign byte
            [0x30, 3 + 2 + 34, 0x02, 34, 0] + [UInt8](repeating: 0x81, count: 33) + one,  // 33-byte magnitude
        ]
        for der in cases {
            #expect(throws: ECDSASignatureError.self, "\(der)") { try ECDSASignature.raw(der: der) }
        }
        #expect(throws: ECDSASignatureError.self) { try ECDSASignature.der(raw: [UInt8](repeating: 1, count: 63)) }
        #expect(throws: ECDSASignatureError.self) { try ECDSASignature.der(raw: [UInt8](repeating: 0, count: 32) + [UInt8](repeating: 1, count: 32)) }
    }
}
