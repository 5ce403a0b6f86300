#if canImport(Glibc)
import Glibc
#endif

/// What an address is, as far as sending to it goes (RFC 6890's special-purpose registries).
public enum AddressScope: String, Sendable, CaseIterable {
    /// 127.0.0.0/8, ::1.
    case loopback
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), fc00::/7 (unique local).
    case privateNetwork = "private"
    /// 169.254/16, fe80::/10: link-local, and the cloud metadata services live here.
    case linkLocal = "link_local"
    /// 0/8, ::, multicast, broadcast, 240/4 and the rest that is no single host on the Internet.
    case special
    case global

    /// The scope of an IPv4 or IPv6 address in text form; nil when it is neither. An IPv4
    /// address inside IPv6 (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) has the IPv4
    /// address's scope, so it cannot be used to reach what the IPv4 form would be refused.
    public static func of(_ text: String) -> AddressScope? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            let b = withUnsafeBytes(of: v4.s_addr) { Array($0) }
            return ipv4(b[0], b[1], b[2], b[3])
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let b = withUnsafeBytes(of: v6) { Array($0) }
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff { return ipv4(b[12], b[13], b[14], b[15]) }
        if b[0..<12] == [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] { return ipv4(b[12], b[13], b[14], b[15]) }
        if b[0..<15].allSatisfy({ $0 == 0 }) { return b[15] == 1 ? .loopback : .special }   // ::1, ::
        if b[0] & 0xfe == 0xfc { return .privateNetwork }
        if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return .linkLocal }
        if b[0] == 0xff { return .special }                                                   // multicast
        if b[0..<12].allSatisfy({ $0 == 0 }) { return .special }                              // IPv4-compatible (deprecated)
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8 { return .special }  // documentation
        return .global
    }

    static func ipv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> AddressScope {
        switch (a, b) {
        case (127, _): return .loopback
        case (10, _), (172, 16...31), (192, 168), (100, 64...127): return .privateNetwork
        case (169, 254): return .linkLocal
        case (0, _), (224...255, _): return .special
        case (192, 0) where c == 0 || c == 2: return .special          // IETF protocol assignments, TEST-NET-1
        case (198, 18...19): return .special                            // benchmarking
        case (198, 51) where c == 100, (203, 0) where c == 113: return .special
        default: return .global
        }
    }
}

/// Which addresses the client may connect to. A push endpoint is a URL anyone with a member
/// token can register, so without this a stranger could make vigild send requests into the
/// operator's own network (SSRF): the daemon refuses every address but global ones unless the
/// operator allows more. Checked on the address actually connected to, after resolution, so a
/// public name that resolves to a private address is refused too.
public struct DestinationPolicy: Equatable, Sendable {
    public var allowed: Set<AddressScope>

    public init(allowed: Set<AddressScope>) {
        self.allowed = allowed
    }

    /// Anything the system can connect to (the client's default: it is given its origins).
    public static let any = DestinationPolicy(allowed: Set(AddressScope.allCases))
    /// Global addresses only, and loopback or private networks when allowed.
    public static func publicOnly(allowLoopback: Bool = false, allowPrivate: Bool = false) -> DestinationPolicy {
        var scopes: Set<AddressScope> = [.global]
        if allowLoopback { scopes.insert(.loopback) }
        if allowPrivate { scopes.formUnion([.privateNetwork, .linkLocal]) }
        return DestinationPolicy(allowed: scopes)
    }

    /// The scope that makes `address` refused; nil when it may be connected to.
    public func refusal(of address: String) -> AddressScope? {
        let scope = AddressScope.of(address) ?? .special
        return allowed.contains(scope) ? nil : scope
    }
}
