import VigilWire

/// Unpadded base64url (RFC 4648 §5), the form of every binary value Web Push puts in text: the
/// subscription's `p256dh` and `auth` (Push API `PushSubscription.toJSON()`), the three parts of a
/// JWT (RFC 7515 §2) and the `k=` of a VAPID header.
///
/// A mapping over VigilWire's strict standard base64 (libcrypto's), so both alphabets share one
/// canonical-form check: a value has exactly one accepted text, and a key that decodes is the key
/// its owner meant.
public enum Base64URLCoding {
    /// `bytes` as unpadded base64url.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        for c in Crypto.base64Encode(bytes).utf8 {
            switch c {
            case UInt8(ascii: "+"): out.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): break
            default: out.append(c)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of base64url `text`, nil for anything but the canonical form. Trailing `=` padding
    /// is tolerated when it is exactly what completes the last quantum: a browser's `toJSON()`
    /// writes none, but keys pasted from other tools sometimes carry it.
    public static func decode(_ text: String) -> [UInt8]? {
        var standard: [UInt8] = []
        standard.reserveCapacity(text.utf8.count + 3)
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            // The other alphabet's two characters are not base64url: refused, not mapped.
            case UInt8(ascii: "+"), UInt8(ascii: "/"): return nil
            default: standard.append(c)
            }
        }
        if standard.count % 4 != 0 {
            // Unpadded: complete it. A padded text of the wrong length stays wrong and is refused.
            if standard.last == UInt8(ascii: "=") { return nil }
            standard.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - standard.count % 4))
        }
        return Crypto.base64Decode(String(decoding: standard, as: UTF8.self))
    }
}
