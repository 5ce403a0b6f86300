extension LoadReport {
    /// The report as a fixed-width table (latencies in milliseconds, 3 decimals), for a terminal.
    public func renderTable() -> String {
        var lines: [String] = []
        // The name column of the rows above the latencies: as wide as their longest name (a
        // scenario's figure names run long, e.g. "server CPU µs per re-subscribe").
        let rowNames = ["scenario", "parameters", "duration", "connections", "sent", "delivered", "client cpu"]
            + (nodes.count > 1 ? nodes.indices.map { "node \($0)" } : []) + figures.map(\.key)
        let label = TextFormat.nameWidth(rowNames)
        func row(_ name: String, _ value: String) {
            lines.append(TextFormat.left(name, label) + value)
        }

        row("scenario", scenario)
        if !parameters.isEmpty {
            row("parameters", parameters.map { "\($0.key)=\($0.value)" }.joined(separator: "  "))
        }
        row("duration", "\(TextFormat.fixed(durationSeconds, 3)) s")
        row("connections", "\(connectionsOpened) opened, \(connectionsFailed) failed")
        row("sent", TextFormat.left(String(sent), 14) + "\(TextFormat.fixed(sentPerSecond, 1))/s")
        row("delivered", TextFormat.left(String(delivered), 14) + "\(TextFormat.fixed(deliveredPerSecond, 1))/s")
        if nodes.count > 1 {
            for (index, node) in nodes.enumerated() {
                row("node \(index)", "\(node.url)  \(node.connections) connections, \(node.delivered) delivered, "
                    + "\(TextFormat.fixed(deliveredPerSecond(node), 1))/s")
            }
        }
        for (key, value) in figures {
            row(key, TextFormat.fixed(value, 3))
        }

        if !latencies.isEmpty {
            lines.append("")
            let nameWidth = TextFormat.nameWidth(latencies.map(\.name))
            let columns = ["count", "p50", "p90", "p99", "p99.9", "max"]
            lines.append(TextFormat.left("latency (ms)", nameWidth) + columns.map { TextFormat.right($0, 11) }.joined())
            for (name, s) in latencies {
                let values = [String(s.count), TextFormat.ms(s.p50), TextFormat.ms(s.p90), TextFormat.ms(s.p99),
                              TextFormat.ms(s.p99_9), TextFormat.ms(s.max)]
                lines.append(TextFormat.left(name, nameWidth) + values.map { TextFormat.right($0, 11) }.joined())
            }
        }

        if !checks.isEmpty {
            lines.append("")
            let nameWidth = TextFormat.nameWidth(checks.map(\.name))
            lines.append(TextFormat.left("check", nameWidth) + TextFormat.right("checked", 9) + TextFormat.right("errors", 9))
            for check in checks {
                let counters = check.counters.map { "\($0.name) \($0.value)" }.joined(separator: ", ")
                lines.append(TextFormat.left(check.name, nameWidth) + TextFormat.right(String(check.checked), 9)
                             + TextFormat.right(String(check.errors.count), 9) + (counters.isEmpty ? "" : "   " + counters))
                for message in check.errors.first {
                    lines.append("  ! " + message)
                }
                let unshown = check.errors.count - UInt64(check.errors.first.count)
                if unshown > 0 { lines.append("  ! ... and \(unshown) more") }
            }
        }

        if let before = serverBefore, let after = serverAfter {
            lines.append("")
            let serverLabel = TextFormat.nameWidth(["server", "cpu s", "rss MiB", "peak rss MiB", "open fds", "threads"])
            lines.append(TextFormat.left("server", serverLabel) + ["before", "after", "change"].map { TextFormat.right($0, 11) }.joined())
            func serverRow(_ name: String, _ b: String, _ a: String, _ change: String, _ note: String = "") {
                lines.append(TextFormat.left(name, serverLabel) + [b, a, change].map { TextFormat.right($0, 11) }.joined() + note)
            }
            let cpuNote = serverCPUPercent.map { "   (\(TextFormat.fixed($0, 1))% of one core)" } ?? ""
            serverRow("cpu s", TextFormat.fixed(before.cpuSeconds, 2), TextFormat.fixed(after.cpuSeconds, 2),
                      TextFormat.fixed(after.cpuSeconds - before.cpuSeconds, 2), cpuNote)
            serverRow("rss MiB", TextFormat.mib(before.rssKiB), TextFormat.mib(after.rssKiB),
                      signed(Double(after.rssKiB) - Double(before.rssKiB), divisor: 1024))
            serverRow("peak rss MiB", TextFormat.mib(before.peakRSSKiB), TextFormat.mib(after.peakRSSKiB),
                      signed(Double(after.peakRSSKiB) - Double(before.peakRSSKiB), divisor: 1024))
            serverRow("open fds", String(before.openFDs), String(after.openFDs),
                      signed(Double(after.openFDs - before.openFDs), divisor: 1, decimals: 0))
            serverRow("threads", String(before.threads), String(after.threads),
                      signed(Double(after.threads - before.threads), divisor: 1, decimals: 0))
        }
        if let seconds = clientCPUSeconds {
            let percent = clientCPUPercent.map { "\(TextFormat.fixed($0, 1))% of one core, " } ?? ""
            if serverBefore == nil { lines.append("") }
            row("client cpu", "\(percent)\(TextFormat.fixed(seconds, 2)) s")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func signed(_ value: Double, divisor: Double, decimals: Int = 1) -> String {
        let text = TextFormat.fixed(value / divisor, decimals)
        return value > 0 ? "+" + text : text
    }
}
