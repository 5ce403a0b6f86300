import VigilLoad

/// Turns a finished run into the `LoadReport` (table and JSON).
enum ReportBuilder {
    static func build(driver: Driver, scenario: Scenario, fdLimit: Int64) -> LoadReport {
        let c = scenario.counters
        let urls = driver.pool.urls
        var parameters: [(key: String, value: String)] = urls.count == 1
            ? [("url", urls[0].description)] : [("urls", urls.map(\.description).joined(separator: " "))]
        parameters += scenario.parameters.map { (key: $0.0, value: $0.1) }
        var checks = driver.checks
        var problems = c.problems
        for note in driver.notes { problems.record(note) }
        checks.append(CheckSummary(name: "replies and connections", checked: Int(c.sent) + scenario.targetConnections,
                                   errors: problems,
                                   counters: [("connect failures", c.connectFailures), ("unexpected closes", c.unexpectedCloses)]))
        // Idle: the server's before is taken before any connection; otherwise at the start of the measured window.
        let isIdle = scenario is IdleScenario
        let before = isIdle ? driver.serverAtStart : driver.serverAtReady
        var report = LoadReport(
            scenario: scenario.name, parameters: parameters, durationSeconds: driver.measuredSeconds,
            connectionsOpened: UInt64(driver.pool.everOpened), connectionsFailed: c.connectFailures,
            sent: c.sent, delivered: c.delivered,
            latencies: scenario.latencies.map { (name: $0.0, summary: $0.1.summary()) },
            checks: checks, serverBefore: before, serverAfter: driver.serverAtEnd,
            clientCPUSeconds: driver.clientCPUAtEnd - driver.clientCPUAtStart)
        if isIdle, let b = driver.serverAtStart, let a = driver.serverAtEnd, scenario.targetConnections > 0 {
            let held = max(1, driver.connectionsAtEnd)
            report.figures.append((key: "RSS/conn KiB", value: (Double(a.rssKiB) - Double(b.rssKiB)) / Double(held)))
            report.figures.append((key: "held conns", value: Double(held)))
        }
        report.nodes = urls.indices.map { node in
            LoadReport.NodeFigures(url: urls[node].description, connections: UInt64(driver.pool.everOpenedByNode[node]),
                                   delivered: urls.count == 1 ? c.delivered : node < c.deliveredByNode.count ? c.deliveredByNode[node] : 0)
        }
        report.figures += scenario.figures.map { (key: $0.0, value: $0.1) }
        if c.resubscribes > 0 {
            report.figures.append((key: "re-subscribes", value: Double(c.resubscribes)))
            // All of the server's CPU over the window, per re-subscribe: the cost of a pan when the
            // publishers are nearly idle (--rate small, --prefill).
            if let cpu = report.serverCPUSeconds {
                report.figures.append((key: "server CPU µs per re-subscribe", value: cpu * 1e6 / Double(c.resubscribes)))
            }
        }
        if let delivered = Optional(c.delivered), c.sent > 0, delivered > 0 {
            report.figures.append((key: "fan-out ratio", value: Double(delivered) / Double(c.sent)))
        }
        return report
    }
}

extension LoadReport {
    var totalErrors: UInt64 { errorCount }
}
