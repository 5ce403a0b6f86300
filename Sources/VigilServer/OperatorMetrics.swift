import Glibc
import Prometheus
import VigilCore

/// The Prometheus exposition of `/metrics` (docs/OPERATIONS.md lists every series).
///
/// The loop counts in plain integers (`ServerCounters`, `V1Stats`: no lock, no atomic on the hot
/// path); at each scrape `exposition` carries their change into swift-prometheus's registry and
/// sets the gauges from a fresh `ServerFigures`. Only the fan-out histogram is recorded as it
/// happens, once per event (never per recipient).
///
/// The registry is the one `vigild` bootstraps swift-metrics with, so anything instrumented
/// through swift-metrics' API appears in the same exposition. Vigil's own series use the registry
/// directly: they carry HELP text, which swift-metrics' API cannot give.
///
/// Every label value comes from a fixed set (operation names, error codes, close codes the
/// server knows, traffic classes, reasons): nothing a client sends becomes a label, so a client
/// cannot grow the exposition.
final class OperatorMetrics {
    let registry: PrometheusCollectorRegistry
    private let fanOut: ValueHistogram
    /// The value each counter series had at the last scrape, by its name and labels.
    private var lastCounts: [String: Int] = [:]
    private var lastSeconds: [String: Double] = [:]

    /// Recipients of one event (every event fans out to 0 or more connections).
    static let fanOutBuckets: [Double] = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 50_000, 100_000]

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        fanOut = registry.makeValueHistogram(name: "vigil_fanout_recipients", buckets: Self.fanOutBuckets,
                                             help: "Connections one event (pin change, panic location or notice) was queued to.")
    }

    /// One event went to `recipients` connections.
    func recordFanOut(_ recipients: Int) {
        fanOut.record(Double(recipients))
    }

    /// The text exposition (format 0.0.4) with every series brought up to date.
    func exposition(_ f: ServerFigures, extra: (inout MetricsSync) -> Void = { _ in }) -> [UInt8] {
        var sync = MetricsSync(registry: registry, lastCounts: lastCounts, lastSeconds: lastSeconds)
        defer { (lastCounts, lastSeconds) = (sync.lastCounts, sync.lastSeconds) }

        // Connections.
        for phase in ConnectionPhase.allCases {
            for (transport, name) in ["plain", "tls"].enumerated() {
                sync.gauge("vigil_connections", labels: ["state": phase.label, "transport": name], f.connections[phase.rawValue][transport],
                           help: "Client connections by phase and transport.")
            }
        }
        sync.gauge("vigil_admin_connections", f.adminConnections, help: "Connections to the admin listener.")
        sync.gauge("vigil_websockets", f.webSockets, help: "Open WebSocket sessions.")
        sync.counter("vigil_connections_accepted_total", f.counters.accepted, help: "Connections accepted.")
        sync.counter("vigil_connections_refused_total", labels: ["reason": "capacity"], f.refusedAtCapacity,
                     help: "Connections closed at accept: max_connections held or shutdown begun (capacity), or no file descriptor left.")
        sync.counter("vigil_connections_refused_total", labels: ["reason": "out_of_descriptors"], f.refusedOutOfDescriptors,
                     help: "Connections closed at accept: max_connections held or shutdown begun (capacity), or no file descriptor left.")
        for cause in ConnectionEnd.allCases {
            sync.counter("vigil_connections_closed_total", labels: ["reason": cause.label], f.counters.ended[cause.rawValue],
                         help: "Connections ended, by why.")
        }
        for (status, count) in f.counters.httpResponses {
            sync.counter("vigil_http_responses_total", labels: ["status": String(status)], count,
                         help: "Plain HTTP responses (not upgrades) by status: health checks, errors, refusals.")
        }

        // Traffic.
        sync.counter("vigil_messages_received_total", f.counters.messagesIn, help: "WebSocket data messages received (all endpoints).")
        sync.counter("vigil_messages_sent_total", f.counters.framesOut, help: "WebSocket data frames queued: replies, events, echoes.")
        sync.counter("vigil_bytes_received_total", f.bytesRead, help: "Bytes read from client sockets (after TLS decryption).")
        sync.counter("vigil_bytes_sent_total", f.bytesWritten, help: "Bytes written to client sockets (before TLS encryption).")
        for (direction, codes) in [("sent", f.counters.closesSent), ("received", f.counters.closesReceived)] {
            var byLabel: [String: Int] = [:]
            for (code, count) in codes { byLabel[Self.closeCodeLabel(code), default: 0] += count }
            for (label, count) in byLabel {
                sync.counter("vigil_websocket_closes_total", labels: ["direction": direction, "code": label], count,
                             help: "WebSocket close frames by direction and code.")
            }
        }
        for traffic in TrafficClass.allCases {
            sync.counter("vigil_slow_consumer_closes_total", labels: ["traffic": "\(traffic)"], f.counters.slowConsumerCloses[traffic.rawValue],
                         help: "Connections closed because their unsent output passed its budget, by the traffic that overflowed.")
        }
        sync.counter("vigil_conflations_total", f.counters.conflations,
                     help: "Sends that replaced a slow watcher's unsent locations of a stream with the newest.")
        sync.gauge("vigil_output_queued_bytes", f.queuedBytes, help: "Bytes queued to clients and not yet written.")

        // /v1.
        for (index, name) in ClientOperation.names.enumerated() {
            sync.counter("vigil_requests_total", labels: ["op": name], f.v1.requests[index], help: "Requests decoded, by operation.")
        }
        for (code, count) in f.v1.errors {
            sync.counter("vigil_request_errors_total", labels: ["code": code], count, help: "Error replies, by code.")
        }
        for refusal in Refusal.allCases {
            sync.counter("vigil_refusals_total", labels: ["limit": refusal.label], f.v1.refusals[refusal.rawValue],
                         help: "Requests refused by a limit (per connection, per address, capacity), by limit.")
        }
        sync.counter("vigil_events_total", f.v1.events, help: "Events fanned out (pin changes, panic locations and notices).")
        sync.counter("vigil_deliveries_total", f.v1.deliveries, help: "Event messages queued to recipients.")
        sync.gauge("vigil_pins", f.pins, help: "Live pins.")
        sync.gauge("vigil_subscriptions", f.subscriptions, help: "Map subscriptions.")
        sync.gauge("vigil_channels", f.channels, help: "Geohash channels with at least one subscriber.")
        sync.gauge("vigil_panic_streams", labels: ["state": "active"], f.streamsActive, help: "Panic streams held: active, or ended and in their grace time.")
        sync.gauge("vigil_panic_streams", labels: ["state": "ended"], f.streamsEnded, help: "Panic streams held: active, or ended and in their grace time.")
        sync.gauge("vigil_panic_watchers", f.watchers, help: "Watching connections, one per stream each watches.")
        sync.counter("vigil_panic_replays_total", f.v1.replays, help: "`since` replays started (a watch that missed at least one held event).")
        sync.counter("vigil_panic_replayed_events_total", f.v1.replayedEvents, help: "Events sent by `since` replays, paced by each watcher's reading and never conflated.")
        sync.counter("vigil_panic_replays_cut_total", f.v1.replaysCut,
                     help: "Replays ended by closing the watcher (1013): the stream's history moved past what it was still owed.")
        sync.gauge("vigil_panic_replays_in_progress", f.v1.replaysInProgress, help: "`since` replays still sending.")
        sync.gauge("vigil_checkin_circles", f.circles, help: "Check-in circles held.")
        sync.gauge("vigil_tracked_addresses", f.trackedAddresses, help: "Client addresses with per-address budgets in memory.")
        sync.gauge("vigil_idempotency_keys", f.v1.idemKeys, help: "Answers kept for idempotency keys (idem), sealed.")
        sync.counter("vigil_idempotency_evicted_total", f.v1.idemEvicted,
                     help: "Kept answers evicted before their window ended to stay within max_keys_per_address or max_keys.")
        sync.counter("vigil_idempotency_repeats_total", f.v1.idemRepeats, help: "Requests answered again from a kept answer (repeat: true).")
        sync.counter("vigil_idempotency_conflicts_total", f.v1.idemConflicts, help: "Requests refused with idem_conflict.")

        // The service and the process.
        sync.gauge("vigil_up_seconds", f.uptimeSeconds, help: "Seconds since vigild started.")
        sync.gauge("vigil_shutting_down", f.phase == .shuttingDown ? 1 : 0, help: "1 once a stop signal arrived.")
        for mode in [StateMode.memoryOnly, .writable, .unavailable, .replicated] {
            sync.gauge("vigil_state_mode", labels: ["mode": mode.rawValue], f.stateMode == mode ? 1 : 0,
                       help: "1 for the state directory's current mode: writable, unavailable (writes refused), memory_only or replicated (a cluster node).")
        }
        sync.counter("vigil_state_refused_writes_total", f.v1.refusedUnrecorded,
                     help: "Changes answered `unavailable` because the state could not record them.")
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let cpuMicros = (Int(usage.ru_utime.tv_sec) + Int(usage.ru_stime.tv_sec)) * 1_000_000
            + Int(usage.ru_utime.tv_usec) + Int(usage.ru_stime.tv_usec)
        sync.counter("process_cpu_seconds_total", seconds: Double(cpuMicros) / 1e6, help: "User and system CPU time spent, in seconds.")
        if let rss = Self.residentBytes() {
            sync.gauge("process_resident_memory_bytes", rss, help: "Resident memory size in bytes.")
        }
        extra(&sync)
        return registry.emitToBuffer()
    }

    /// A close code as a label: the codes of RFC 6455 §7.4.1 and the registered range by number;
    /// anything else a peer may send grouped, so that a client cannot mint new series.
    static func closeCodeLabel(_ code: UInt16) -> String {
        switch code {
        case 1000...1015: return String(code)
        case 3000...3999: return "3xxx"
        case 4000...4999: return "4xxx"
        default: return "other"
        }
    }

    /// VmRSS from /proc/self/statm (pages × page size).
    static func residentBytes() -> Int? {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let fields = buffer[0..<n].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Brings registry series up to date during one scrape.
struct MetricsSync {
    let registry: PrometheusCollectorRegistry
    var lastCounts: [String: Int]
    var lastSeconds: [String: Double]

    /// A counter series reaches `value` (a running total kept elsewhere).
    mutating func counter(_ name: String, labels: KeyValuePairs<String, String> = [:], _ value: Int, help: String) {
        let pairs = labels.map { ($0.key, $0.value) }
        let key = pairs.reduce(name) { $0 + "|" + $1.0 + "=" + $1.1 }
        let last = lastCounts[key] ?? 0
        let counter = registry.makeCounter(name: name, labels: pairs, help: help)
        if value > last {
            counter.increment(by: Int64(value - last))
        }
        lastCounts[key] = max(value, last)
    }

    /// A counter series in seconds reaches `value`.
    mutating func counter(_ name: String, seconds value: Double, help: String) {
        let last = lastSeconds[name] ?? 0
        let counter = registry.makeCounter(name: name, labels: [], help: help)
        if value > last { counter.increment(by: value - last) }
        lastSeconds[name] = max(value, last)
    }

    mutating func gauge(_ name: String, labels: KeyValuePairs<String, String> = [:], _ value: Int, help: String) {
        gauge(name, labels: labels, Double(value), help: help)
    }

    mutating func gauge(_ name: String, labels: KeyValuePairs<String, String> = [:], _ value: Double, help: String) {
        registry.makeGauge(name: name, labels: labels.map { ($0.key, $0.value) }, help: help).set(to: value)
    }
}
