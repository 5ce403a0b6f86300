import CLinux
import Glibc

/// Delivers POSIX signals as loop events through a signalfd, so handlers run on the loop thread
/// as ordinary code (no async-signal-safety rules to follow).
public final class SignalSource: EventHandler {
    public let fd: Int32
    private let onSignal: (Int32) -> Void

    /// Blocks `signals` for the process (call before starting other threads) and watches them.
    public init(signals: [Int32], loop: EventLoop, onSignal: @escaping (Int32) -> Void) throws {
        let fd = signals.withUnsafeBufferPointer { vigil_signalfd_for($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { throw SystemError("signalfd") }
        self.fd = fd
        self.onSignal = onSignal
        try loop.register(fd: fd, events: .readable, handler: self)
    }

    public func handleEvents(_ events: IOEvents) {
        while true {
            let signal = vigil_signalfd_read(fd)
            if signal <= 0 { return }
            onSignal(signal)
        }
    }
}

/// A periodic CLOCK_MONOTONIC timerfd: the heartbeat that advances timer wheels.
public final class PeriodicTimer: EventHandler {
    public let fd: Int32
    private let onTick: () -> Void

    public init(intervalMs: Int, loop: EventLoop, onTick: @escaping () -> Void) throws {
        let fd = vigil_timerfd_periodic(Int32(intervalMs))
        guard fd >= 0 else { throw SystemError("timerfd_create") }
        self.fd = fd
        self.onTick = onTick
        try loop.register(fd: fd, events: .readable, handler: self)
    }

    public func handleEvents(_ events: IOEvents) {
        if vigil_timerfd_read(fd) > 0 { onTick() }
    }
}

/// Process-wide resource setup a server needs before it accepts its first connection.
public enum ProcessLimits {
    /// Raises the soft RLIMIT_NOFILE to the hard limit; returns the limit now in force.
    public static func raiseFileDescriptorLimit() throws -> Int64 {
        let limit = vigil_raise_nofile_limit()
        guard limit >= 0 else { throw SystemError("setrlimit(RLIMIT_NOFILE)") }
        return limit
    }

    /// Writes to a peer that has gone return EPIPE instead of killing the process.
    public static func ignoreSIGPIPE() {
        signal(SIGPIPE, SIG_IGN)
    }
}
