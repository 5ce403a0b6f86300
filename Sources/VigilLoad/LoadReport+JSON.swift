import VigilCore

extension LoadReport {
    /// The report as one JSON object with a fixed key order (so two runs diff cleanly). Numbers
    /// are numbers: counts and nanoseconds as integers, seconds and rates as doubles.
    ///
    ///     {"scenario":..,"parameters":{..},"duration_s":..,"connections":{"opened":..,"failed":..},
    ///      "messages":{"sent":..,"delivered":..,"sent_per_s":..,"delivered_per_s":..},
    ///      "nodes":[{"url":..,"connections":..,"delivered":..,"delivered_per_s":..}],
    ///      "latency_ns":{"map event":{"count":..,"p50":..,"p90":..,"p99":..,"p99_9":..,"max":..}},
    ///      "checks":[{"name":..,"checked":..,"errors":..,"first_errors":[..],"counters":{..}}],
    ///      "server":{"before":{..},"after":{..},"cpu_s":..,"cpu_percent":..},
    ///      "client":{"cpu_s":..,"cpu_percent":..}}
    ///
    /// `server` and `client` are null when not measured.
    public func renderJSON() -> String {
        var w = JSONWriter(capacity: 1024)
        w.beginObject()
        w.field("scenario", scenario)
        w.key("parameters")
        w.beginObject()
        for (key, value) in parameters {
            w.key(key)
            w.string(value)
        }
        w.endObject()
        w.field("duration_s", durationSeconds)
        w.key("connections")
        w.beginObject()
        w.field("opened", Int64(clamping: connectionsOpened))
        w.field("failed", Int64(clamping: connectionsFailed))
        w.endObject()
        w.key("messages")
        w.beginObject()
        w.field("sent", Int64(clamping: sent))
        w.field("delivered", Int64(clamping: delivered))
        w.field("sent_per_s", sentPerSecond)
        w.field("delivered_per_s", deliveredPerSecond)
        w.endObject()
        w.key("nodes")
        w.beginArray()
        for node in nodes {
            w.beginObject()
            w.field("url", node.url)
            w.field("connections", Int64(clamping: node.connections))
            w.field("delivered", Int64(clamping: node.delivered))
            w.field("delivered_per_s", deliveredPerSecond(node))
            w.endObject()
        }
        w.endArray()
        w.key("figures")
        w.beginObject()
        for (key, value) in figures {
            w.key(key)
            w.double(value)
        }
        w.endObject()
        w.key("latency_ns")
        w.beginObject()
        for (name, s) in latencies {
            w.key(name)
            w.beginObject()
            w.field("count", Int64(clamping: s.count))
            w.field("p50", Int64(clamping: s.p50))
            w.field("p90", Int64(clamping: s.p90))
            w.field("p99", Int64(clamping: s.p99))
            w.field("p99_9", Int64(clamping: s.p99_9))
            w.field("max", Int64(clamping: s.max))
            w.endObject()
        }
        w.endObject()
        w.key("checks")
        w.beginArray()
        for check in checks {
            w.beginObject()
            w.field("name", check.name)
            w.field("checked", Int64(check.checked))
            w.field("errors", Int64(clamping: check.errors.count))
            w.key("first_errors")
            w.beginArray()
            for message in check.errors.first { w.string(message) }
            w.endArray()
            w.key("counters")
            w.beginObject()
            for counter in check.counters {
                w.key(counter.name)
                w.int(Int64(clamping: counter.value))
            }
            w.endObject()
            w.endObject()
        }
        w.endArray()
        w.key("server")
        if let before = serverBefore, let after = serverAfter {
            w.beginObject()
            w.key("before")
            Self.write(before, into: &w)
            w.key("after")
            Self.write(after, into: &w)
            w.field("cpu_s", after.cpuSeconds - before.cpuSeconds)
            w.key("cpu_percent")
            if let percent = serverCPUPercent { w.double(percent) } else { w.null() }
            w.endObject()
        } else {
            w.null()
        }
        w.key("client")
        if let seconds = clientCPUSeconds {
            w.beginObject()
            w.field("cpu_s", seconds)
            w.key("cpu_percent")
            if let percent = clientCPUPercent { w.double(percent) } else { w.null() }
            w.endObject()
        } else {
            w.null()
        }
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    private static func write(_ sample: ProcSample, into w: inout JSONWriter) {
        w.beginObject()
        w.field("cpu_s", sample.cpuSeconds)
        w.field("rss_kib", Int64(clamping: sample.rssKiB))
        w.field("peak_rss_kib", Int64(clamping: sample.peakRSSKiB))
        w.field("open_fds", Int64(sample.openFDs))
        w.field("threads", Int64(sample.threads))
        w.endObject()
    }
}
