import Foundation

/// How the client reconnects: exponential backoff with jitter.
///
/// The delay before attempt *n* (from 0) is `min(maxDelay, minDelay × factorⁿ)`, cut by up to
/// `jitter` of it at random: `delay × (1 − jitter × random())`. The defaults are the JavaScript
/// client's: 500 ms doubling to 15 s, each delay cut by up to half.
public struct ReconnectPolicy: Sendable, Equatable {
    /// The first delay (500 ms).
    public var minDelay: Duration
    /// The longest delay (15 s).
    public var maxDelay: Duration
    /// The growth per failed attempt (2).
    public var factor: Double
    /// The share of a delay that may be cut at random, in [0, 1] (0.5).
    public var jitter: Double

    /// A policy; the defaults are the JavaScript client's.
    public init(minDelay: Duration = .milliseconds(500), maxDelay: Duration = .seconds(15), factor: Double = 2, jitter: Double = 0.5) {
        self.minDelay = minDelay
        self.maxDelay = maxDelay
        self.factor = factor
        self.jitter = jitter
    }

    /// The delay before the attempt after `attempt` failed ones, with `random` in [0, 1).
    public func delay(attempt: Int, random: Double) -> Duration {
        let minMs = Double(minDelay.milliseconds), maxMs = Double(maxDelay.milliseconds)
        let base = Swift.min(maxMs, minMs * pow(factor, Double(attempt)))
        let ms = (base * (1 - jitter * random)).rounded()
        return .milliseconds(ms.isFinite ? Int64(Swift.max(0, Swift.min(ms, maxMs))) : 0)
    }
}

extension Duration {
    /// The duration in whole milliseconds (rounded down).
    var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}

/// The time source of the client's timers (request timeouts, backoff, heartbeat, the position
/// follower's interval), injectable so tests drive time instead of waiting for it.
public protocol VigilClock: Sendable {
    /// Monotonic time since an arbitrary origin.
    var now: Duration { get }
    /// Returns once ``now`` has reached `deadline`; throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Duration) async throws
}

/// The real clock: `ContinuousClock`.
public struct SystemClock: VigilClock {
    private let origin = ContinuousClock.now
    /// A clock whose origin is now.
    public init() {}
    /// Time since this clock was made.
    public var now: Duration { ContinuousClock.now - origin }
    /// Sleeps until `deadline`.
    public func sleep(until deadline: Duration) async throws {
        try await Task.sleep(until: origin + deadline, clock: .continuous)
    }
}

/// What ``VigilClient`` can be told at its creation.
public struct VigilClientOptions: Sendable {
    /// Each request's timeout, counting the wait for a connection (10 s); `nil`: none.
    public var requestTimeout: Duration? = .seconds(10)
    /// ``VigilClient/connect()``'s wait for the first welcome; `nil` (the default): as long as it takes.
    public var connectTimeout: Duration? = nil
    /// One attempt's wait for the TCP/TLS connection, the handshake and the welcome (10 s).
    public var attemptTimeout: Duration = .seconds(10)
    /// How often `rate_limited` is waited out and retried before it reaches the caller (3).
    public var rateLimitRetries: Int = 3
    /// Reconnects, or `nil` for none (the client closes when its connection is lost).
    public var reconnect: ReconnectPolicy? = ReconnectPolicy()
    /// After this long without a message from the server, a harmless request checks the
    /// connection (`nil`, the default: no heartbeat).
    public var heartbeat: Duration? = nil
    /// How long the heartbeat's request may take before the connection is taken for dead and
    /// replaced (10 s).
    public var heartbeatTimeout: Duration = .seconds(10)
    /// The WebSocket subprotocol offered (`vigil.v1`); kept for transports that take it.
    public var subprotocol: String = "vigil.v1"
    /// Whether every write carries an `"idem"` key (on). A server without support for `idem`
    /// refuses it as `unknown_field`: turn it off there. Off, a write whose connection dropped
    /// before its answer fails with `disconnected` instead of being sent again (it may or may
    /// not have been applied); writes made while offline still wait in the outbox.
    public var sendsIdempotencyKeys: Bool = true
    /// How many writes may wait in the outbox (unsent, or sent and unanswered) at once (100).
    public var outboxLimit: Int = 100
    /// The clock of every timer (``SystemClock``).
    public var clock: any VigilClock = SystemClock()
    /// The random numbers in [0, 1) of the backoff's jitter.
    public var random: @Sendable () -> Double = { Double.random(in: 0..<1) }

    /// The defaults.
    public init() {}
}

/// A random key of 22 base64url characters (128 bits) for `"idem"`: chosen once per logical
/// write and sent again with it on every resend.
public func makeIdempotencyKey() -> String {
    var g = SystemRandomNumberGenerator()
    var bytes = [UInt8]()
    bytes.reserveCapacity(16)
    for _ in 0..<2 {
        var w = g.next() as UInt64
        for _ in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: w)); w >>= 8 }
    }
    return Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}
