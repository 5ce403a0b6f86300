import Glibc

/// A failed system call: names the call and carries errno, so every log line says what failed and why.
public struct SystemError: Error, CustomStringConvertible, Equatable {
    public let call: String
    public let errno: Int32

    public init(_ call: String, errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
    }

    public var description: String {
        "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}

/// Monotonic milliseconds (CLOCK_MONOTONIC): the only clock the loop and its timers use.
@inline(__always)
public func monotonicMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) &* 1000 &+ Int64(ts.tv_nsec) / 1_000_000
}
