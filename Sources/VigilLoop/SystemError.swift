import Glibc

/// A failed system call: names the call and carries errno, so every log line says what failed and why.
///
/// A TLS failure is reported the same way (`call` names the TLS step, `errno` is EPROTO) with
/// OpenSSL's reasons in `detail`.
public struct SystemError: Error, CustomStringConvertible, Equatable, Sendable {
    public let call: String
    public let errno: Int32
    public let detail: String?

    public init(_ call: String, errno: Int32 = Glibc.errno, detail: String? = nil) {
        self.call = call
        self.errno = errno
        self.detail = detail
    }

    public var description: String {
        let base = "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
        guard let detail else { return base }
        return "\(base): \(detail)"
    }
}

/// Monotonic milliseconds (CLOCK_MONOTONIC): the only clock the loop and its timers use.
@inline(__always)
public func monotonicMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) &* 1000 &+ Int64(ts.tv_nsec) / 1_000_000
}
