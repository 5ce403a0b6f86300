/// `Retry-After` (RFC 9110 §10.2.3) as a delay: delta-seconds as given, or an HTTP-date less the
/// time now (0 when it has passed). A push service sends it with 429 and 503; the delivery
/// scheduler decides what to do with it (this only reads it).
public enum RetryAfter {
    /// The largest delay reported (a value past it is taken as it): about 68 years, so any
    /// digits fit, and whoever schedules caps it at what it is willing to wait.
    public static let maxSeconds = Int64(Int32.max)

    /// Seconds to wait, or nil when `value` is neither form. `nowUnixSeconds` is the wall clock
    /// when the response arrived (an HTTP-date is absolute).
    public static func delaySeconds(_ value: String, nowUnixSeconds: Int64) -> Int64? {
        let trimmed = HTTPHeaderSearch.trimOWS(Array(value.utf8))
        guard !trimmed.isEmpty else { return nil }
        if trimmed.allSatisfy({ HTTPSyntax.digit($0) != nil }) {
            var seconds: Int64 = 0
            for c in trimmed {
                seconds = min(seconds * 10 + Int64(HTTPSyntax.digit(c)!), maxSeconds)
            }
            return seconds
        }
        guard let at = HTTPDate.parse(String(decoding: trimmed, as: UTF8.self), nowUnixSeconds: nowUnixSeconds) else { return nil }
        return min(max(at - nowUnixSeconds, 0), maxSeconds)
    }
}
