import Logging
import VigilCore
import VigilLoop
import VigilWire

/// The operator's surface: the admin listener's endpoints (`/metrics`, `/stats`, `/healthz`,
/// `/state/digest` in `Server+StateDigest`),
/// the public `/healthz`, the minute's summary log line and systemd's notifications.
extension Server {
    /// Everything the operator's endpoints report, now.
    func figures() -> ServerFigures {
        var f = ServerFigures()
        for case let connection? in connections {
            if connection.isAdmin {
                f.adminConnections += 1
                continue
            }
            let phase: ConnectionPhase
            switch connection.lifecycle.phase {
            case .http: phase = .handshake
            case .open: phase = .open
            case .closeSent, .draining, .closed: phase = .closing
            }
            f.connections[phase.rawValue][connection.usesTLS ? 1 : 0] += 1
        }
        f.webSockets = webSocketCount
        f.queuedBytes = loop.queuedBytes
        f.bytesRead = loop.bytesRead
        f.bytesWritten = loop.bytesWritten
        f.refusedAtCapacity = refusedCount
        f.refusedOutOfDescriptors = (listener?.refused ?? 0) + (tlsListener?.refused ?? 0) + listenerRefusedBefore
        f.uptimeSeconds = Int((monotonicMilliseconds() - startedMs) / 1000)
        f.counters = counters
        f.phase = shutdownRequested == nil ? .serving : .shuttingDown
        if let v1 {
            f.v1 = v1.stats
            f.v1.replaysInProgress = v1.replays.count
            f.v1.idemKeys = v1.kept.count
            f.v1.idemEvicted = Int(v1.kept.evicted)
            f.pins = v1.hub.store.count
            f.channels = v1.hub.subscriptions.channelCount
            f.subscriptions = v1.hub.subscriptions.count
            f.streamsActive = v1.panic.activeCount
            f.streamsEnded = v1.panic.count - f.streamsActive
            f.watchers = v1.panic.totalWatchers
            f.circles = v1.checkin.count
            f.trackedAddresses = v1.budgets.count
            f.stateMode = v1.stateMode
        }
        return f
    }

    // MARK: routes

    /// The public `/healthz`: ok or not, nothing more (the detail is on the admin listener). Not
    /// ok (503) once shutdown has begun, so a load balancer stops sending clients here.
    func publicHealth(_ head: HTTPRequestHead) -> HTTPResponse {
        let serving = shutdownRequested == nil
        let body = serving ? #"{"status":"ok"}"# + "\n" : #"{"status":"unavailable"}"# + "\n"
        let bytes = Array(body.utf8)
        // HEAD: no body, and the length a GET would have carried (RFC 9110 §8.6), not 0.
        return HTTPResponse(status: serving ? .ok : .serviceUnavailable, body: head.method == "HEAD" ? [] : bytes,
                            contentType: "application/json", contentLength: bytes.count)
    }

    /// A request on the admin listener: no WebSocket, only the operator's endpoints.
    func adminRoute(_ head: HTTPRequestHead) -> HTTPResponse {
        guard head.method == "GET" || head.method == "HEAD" else {
            return HTTPResponse(status: .methodNotAllowed, headers: [("Allow", "GET, HEAD")], body: Array("use GET\n".utf8),
                                contentType: "text/plain; charset=utf-8")
        }
        let body: [UInt8]
        let type: String
        var status = HTTPStatus.ok
        switch head.path {
        case "/metrics":
            body = metrics.exposition(figures()) { [self] sync in
                v1?.persistenceMetrics(&sync)
                v1?.alertMetrics(&sync)
                v1?.replicationMetrics(&sync)
            }
            type = "text/plain; version=0.0.4; charset=utf-8"
        case "/stats":
            body = Self.statsJSON(figures())
            type = "application/json"
        case "/state/digest":
            return stateDigestResponse(head)
        case "/healthz":
            let f = figures()
            if f.phase != .serving { status = .serviceUnavailable }
            var w = JSONWriter(capacity: 256)
            w.beginObject()
            w.field("status", f.phase == .serving ? "ok" : f.phase.rawValue)
            w.field("state", f.stateMode.rawValue)
            if f.stateMode == .replicated { w.field("snapshots", v1?.persistence == nil ? "none" : "local") }
            w.field("websockets", Int64(f.webSockets))
            w.field("connections", Int64(f.totalConnections))
            w.field("uptime_s", Int64(f.uptimeSeconds))
            if let replication = v1?.replication { replication.health(into: &w) }
            w.endObject()
            body = w.bytes + [10]
            type = "application/json"
        default:
            return HTTPResponse(status: .notFound, body: Array("no such endpoint: try /metrics, /stats, /healthz or /state/digest\n".utf8),
                                contentType: "text/plain; charset=utf-8")
        }
        return HTTPResponse(status: status, body: head.method == "HEAD" ? [] : body, contentType: type, contentLength: body.count)
    }

    /// `/stats`: the live counts an admin dashboard shows, and the running totals.
    static func statsJSON(_ f: ServerFigures) -> [UInt8] {
        var w = JSONWriter(capacity: 1024)
        w.beginObject()
        w.field("status", f.phase == .serving ? "ok" : f.phase.rawValue)
        w.field("state", f.stateMode.rawValue)
        w.field("uptime_s", Int64(f.uptimeSeconds))
        w.key("connections")
        w.beginObject()
        for phase in ConnectionPhase.allCases { w.key(phase.label); w.int(Int64(f.connections[phase.rawValue][0] + f.connections[phase.rawValue][1])) }
        w.field("tls", Int64(f.connections.reduce(0) { $0 + $1[1] }))
        w.field("admin", Int64(f.adminConnections))
        w.endObject()
        w.field("websockets", Int64(f.webSockets))
        w.field("pins", Int64(f.pins))
        w.field("subscriptions", Int64(f.subscriptions))
        w.field("channels", Int64(f.channels))
        w.key("panic")
        w.beginObject()
        w.field("active", Int64(f.streamsActive))
        w.field("ended", Int64(f.streamsEnded))
        w.field("watchers", Int64(f.watchers))
        w.endObject()
        w.field("tracked_addresses", Int64(f.trackedAddresses))
        w.field("queued_bytes", Int64(f.queuedBytes))
        w.key("totals")
        w.beginObject()
        w.field("accepted", Int64(f.counters.accepted))
        w.field("messages_in", Int64(f.counters.messagesIn))
        w.field("messages_out", Int64(f.counters.framesOut))
        w.field("events", Int64(f.v1.events))
        w.field("deliveries", Int64(f.v1.deliveries))
        w.field("errors", Int64(f.v1.errors.values.reduce(0, +)))
        w.field("refusals", Int64(f.v1.refusals.reduce(0, +)))
        w.field("slow_consumer_closes", Int64(f.counters.slowConsumerCloses.reduce(0, +)))
        w.field("connections_refused", Int64(f.refusedAtCapacity + f.refusedOutOfDescriptors))
        w.endObject()
        w.endObject()
        return w.bytes + [10]
    }

    // MARK: the minute's summary

    /// Once per `log.summary_interval_s`: one info line with the live counts and what changed
    /// since the last one (messages, deliveries, closes by reason, refusals). Counts only.
    func logSummary() {
        let f = figures()
        let last = lastSummary ?? ServerFigures()
        var metadata: Logger.Metadata = [
            "connections": "\(f.totalConnections)",
            "websockets": "\(f.webSockets)",
            "messages_in": "\(f.counters.messagesIn - last.counters.messagesIn)",
            "deliveries": "\(f.v1.deliveries - last.v1.deliveries)",
            "refusals": "\(f.v1.refusals.reduce(0, +) - last.v1.refusals.reduce(0, +) + f.refusedAtCapacity - last.refusedAtCapacity)",
            "pins": "\(f.pins)",
            "streams": "\(f.streamsActive)",
            "state": "\(f.stateMode.rawValue)",
        ]
        var closes: [String] = []
        for cause in ConnectionEnd.allCases {
            let n = f.counters.ended[cause.rawValue] - last.counters.ended[cause.rawValue]
            if n > 0 { closes.append("\(cause.label):\(n)") }
        }
        metadata["closes"] = "\(closes.isEmpty ? "none" : closes.joined(separator: ","))"
        logger.info("summary", metadata: metadata)
        lastSummary = f
        notifier?.send("STATUS=\(Self.statusLine(f))")
    }

    /// systemd's one-line status (`systemctl status vigild`).
    static func statusLine(_ f: ServerFigures) -> String {
        let state: String
        switch f.stateMode {
        case .writable: state = "state writable"
        case .memoryOnly: state = "state in memory only"
        case .unavailable: state = "STATE UNAVAILABLE: writes refused"
        case .replicated: state = "state replicated"
        }
        return "\(f.webSockets) websockets, \(f.pins) pins, \(f.streamsActive) active streams; \(state)"
    }
}
