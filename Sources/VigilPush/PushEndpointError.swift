/// Why a subscription's endpoint URL is refused. The URL comes from a browser through the client,
/// so it is hostile input: the daemon connects only where these checks allow.
public enum PushEndpointError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Longer than any push service's endpoint (`PushEndpoint.maxByteCount`).
    case tooLong(Int)
    /// Not `scheme://authority[/path]`, or characters a URL may not hold (space, control, non-ASCII).
    case malformed(String)
    /// A scheme other than https (and http to loopback, when the caller allows it).
    case schemeNotAllowed(String)
    /// `user:password@` in the authority: no push service uses it, and it hides the real host.
    case userInfo
    /// An empty or invalid host.
    case badHost(String)
    /// A port that is not a number from 1 to 65535.
    case badPort(String)

    public var description: String {
        switch self {
        case .tooLong(let count): return "the endpoint URL is \(count) bytes, more than \(PushEndpoint.maxByteCount)"
        case .malformed(let why): return "the endpoint is not a URL: \(why)"
        case .schemeNotAllowed(let scheme): return "endpoint scheme \(scheme) is not allowed (https only; http only to loopback in tests)"
        case .userInfo: return "the endpoint URL carries user information"
        case .badHost(let host): return "endpoint host \(host.isEmpty ? "(empty)" : host) is not valid"
        case .badPort(let port): return "endpoint port \(port) is not valid"
        }
    }
}
