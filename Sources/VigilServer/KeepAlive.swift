/// The keep-alive rule for an open connection, as a pure decision the server acts on.
///
/// Any input counts as liveness (a client busy sending need not also answer pings). After
/// `interval` without input the server sends a ping; if `timeout` then passes still without
/// input, the client is dropped.
public enum KeepAlive {
    public enum Action: Equatable {
        /// Not due yet: look again at this time.
        case wait(until: Int64)
        /// Send a ping now and look again at `timeoutAt`.
        case ping(timeoutAt: Int64)
        /// No answer in time.
        case drop
    }

    /// - Parameter pingSentAt: when the outstanding ping was sent, 0 when none is (input clears it).
    public static func decide(now: Int64, lastActivity: Int64, pingSentAt: Int64, interval: Int64, timeout: Int64) -> Action {
        if pingSentAt != 0 {
            return now >= pingSentAt + timeout ? .drop : .wait(until: pingSentAt + timeout)
        }
        if now >= lastActivity + interval {
            return .ping(timeoutAt: now + timeout)
        }
        return .wait(until: lastActivity + interval)
    }
}
