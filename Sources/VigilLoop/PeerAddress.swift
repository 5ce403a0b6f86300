import Glibc

/// A peer's IP address, IPv4 held as IPv4-mapped IPv6 (::ffff:a.b.c.d), so one type and one
/// prefix test serve both families. It lives only as long as the connection's accept: what the
/// server keeps is `key`, a keyed hash, which is never logged or written anywhere.
public struct PeerAddress: Hashable, Sendable {
    public let high: UInt64
    public let low: UInt64

    public init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == 16)
        high = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        low = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses a numeric IPv4 or IPv6 address (as in X-Forwarded-For); nil for anything else.
    public init?(parsing text: Substring) {
        let trimmed = String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
        guard trimmed.utf8.count <= 45 else { return nil }  // INET6_ADDRSTRLEN - 1
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, trimmed, &v4) == 1 {
            let a = UInt32(bigEndian: v4.s_addr)
            self.init(high: 0, low: 0x0000_FFFF_0000_0000 | UInt64(a))
        } else if inet_pton(AF_INET6, trimmed, &v6) == 1 {
            self = withUnsafeBytes(of: &v6) { PeerAddress(bytes: $0) }
        } else {
            return nil
        }
    }

    public var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    /// A 64-bit keyed hash: SipHash with the process's random seed (Swift's `Hasher`), so the same
    /// address maps to the same key in this process and to an unrelated one in any other run, and
    /// the address cannot be read back from it.
    public var key: UInt64 {
        var hasher = Hasher()
        hasher.combine(high)
        hasher.combine(low)
        return UInt64(bitPattern: Int64(hasher.finalize()))
    }

    /// The key of a peer with no IP address (a Unix socket: one local peer); hashed from a
    /// different input than any address, so it cannot collide with one by construction.
    public static let localKey: UInt64 = {
        var hasher = Hasher()
        hasher.combine("local peer without an IP address")
        return UInt64(bitPattern: Int64(hasher.finalize()))
    }()
}

/// An address prefix from the config (`10.0.0.0/8`, `::1/128`, or a bare address), for the
/// trusted reverse proxies whose `X-Forwarded-For` is believed.
public struct AddressPrefix: Equatable, Sendable, CustomStringConvertible {
    let address: PeerAddress
    /// Prefix length in the 128-bit form (an IPv4 /8 is /104 here).
    let bits: Int
    public let description: String

    public init?(parsing text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = PeerAddress(parsing: parts[0]) else { return nil }
        let family = address.isIPv4 ? 32 : 128
        var bits = family
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...family).contains(n), !parts[1].hasPrefix("+") else { return nil }
            bits = n
        }
        self.address = address
        self.bits = address.isIPv4 ? 96 + bits : bits
        self.description = text
    }

    public func contains(_ peer: PeerAddress) -> Bool {
        Self.masked(peer, bits) == Self.masked(address, bits)
    }

    private static func masked(_ a: PeerAddress, _ bits: Int) -> PeerAddress {
        func mask(_ n: Int) -> UInt64 { n <= 0 ? 0 : n >= 64 ? ~0 : ~0 << UInt64(64 - n) }
        return PeerAddress(high: a.high & mask(bits), low: a.low & mask(bits - 64))
    }
}

extension Array where Element == AddressPrefix {
    public func contains(_ peer: PeerAddress) -> Bool { contains { $0.contains(peer) } }
}

/// Who a request really comes from when the socket's peer is a trusted proxy: the right-most
/// address of its `X-Forwarded-For` chain that is not a trusted proxy itself (the first hop a
/// trusted proxy saw). nil: the peer itself (no header). A malformed entry stops the walk at the
/// last good address (a client can write anything to the left of what the proxies append).
public enum ForwardedFor {
    public static func client(headers: [String], trusted: [AddressPrefix]) -> PeerAddress? {
        var current: PeerAddress?
        let hops = headers.flatMap { $0.split(separator: ",") }
        for hop in hops.reversed() {
            guard let address = PeerAddress(parsing: hop) else { return current }
            current = address
            if !trusted.contains(address) { return address }
        }
        return current
    }
}
