/// The one line a second the load client prints while it runs, e.g.
///
///     [  12s] conns 1020  sent 24000 (2000/s)  delivered 2400000 (200000/s)  p99 1.234 ms  errors 0
///
/// The p99 is of the last second only (`IntervalLatency`), so a stall shows when it happens
/// instead of vanishing into the run's total.
public enum ProgressLine {
    public static func format(elapsedSeconds: Double, connections: Int, sent: UInt64, sentPerSecond: Double,
                              delivered: UInt64, deliveredPerSecond: Double, p99Ns: UInt64?, errors: UInt64) -> String {
        let elapsed = TextFormat.right(TextFormat.fixed(elapsedSeconds, 0), 4)
        let p99 = p99Ns.map { "\(TextFormat.ms($0)) ms" } ?? "-"
        return "[\(elapsed)s] conns \(connections)  sent \(sent) (\(TextFormat.fixed(sentPerSecond, 0))/s)"
            + "  delivered \(delivered) (\(TextFormat.fixed(deliveredPerSecond, 0))/s)  p99 \(p99)  errors \(errors)"
    }
}
