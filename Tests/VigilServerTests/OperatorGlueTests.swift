import Foundation
import Glibc
import Logging
import Synchronization
import Testing
import VigilCore
import VigilLoop
import VigilWire
@testable import VigilServer

/// The operator's surface over socketpairs: `/metrics`, `/stats`, the two `/healthz`, the
/// admin listener's own connection cap, and the minute's summary line.
@Suite struct OperatorGlueTests {
    /// One valid request of each operation (the fuzz seeds' shapes): each decodes, whatever its answer.
    static let oneOfEach = [
        #"{"op":"subscribe","ref":1,"area":{"bbox":[52.3,13.0,52.7,13.8]}}"#,
        #"{"op":"unsubscribe","ref":2}"#,
        #"{"op":"pin.create","ref":3,"pin":{"lat":52.52,"lon":13.405,"title":"Fox"}}"#,
        #"{"op":"pin.update","ref":4,"id":"9b2f5c1e-3c4d-4a5b-8c6d-7e8f9a0b1c2d","edit_token":"q0Xr9","changes":{"title":"Two"}}"#,
        #"{"op":"pin.delete","ref":5,"id":"9b2f5c1e-3c4d-4a5b-8c6d-7e8f9a0b1c2d","edit_token":"q0Xr9"}"#,
        #"{"op":"pin.vote","ref":6,"id":"9b2f5c1e-3c4d-4a5b-8c6d-7e8f9a0b1c2d","value":-1}"#,
        #"{"op":"panic.start","ref":7,"status":"red","lat":52.52,"lon":13.405}"#,
        #"{"op":"panic.update","ref":8,"stream":"oq8jnOD0Pcoar4QgMwxmoA","lat":52.5,"lon":13.4}"#,
        #"{"op":"panic.status","ref":9,"stream":"oq8jnOD0Pcoar4QgMwxmoA","owner_token":"t0","status":"amber"}"#,
        #"{"op":"panic.end","ref":10,"stream":"oq8jnOD0Pcoar4QgMwxmoA","reason":"safe"}"#,
        #"{"op":"panic.resume","ref":11,"stream":"oq8jnOD0Pcoar4QgMwxmoA","owner_token":"t0"}"#,
        #"{"op":"panic.watch","ref":12,"stream":"oq8jnOD0Pcoar4QgMwxmoA","watch_token":"w0"}"#,
        #"{"op":"panic.unwatch","ref":13,"stream":"oq8jnOD0Pcoar4QgMwxmoA"}"#,
        #"{"op":"panic.invite","ref":14,"stream":"oq8jnOD0Pcoar4QgMwxmoA"}"#,
        #"{"op":"panic.revoke","ref":15,"stream":"oq8jnOD0Pcoar4QgMwxmoA","watch_token":"w0"}"#,
        #"{"op":"panic.timer","ref":16,"stream":"oq8jnOD0Pcoar4QgMwxmoA","due_in_s":900}"#,
        #"{"op":"panic.rekey","ref":16,"stream":"oq8jnOD0Pcoar4QgMwxmoA","kid":"oKGio6SlpqeoqaqrrK2urw"}"#,
        #"{"op":"checkin.create","ref":17,"members":["Mum"]}"#,
        #"{"op":"checkin.open","ref":18,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0"}"#,
        #"{"op":"checkin.invite","ref":19,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0"}"#,
        #"{"op":"checkin.revoke","ref":20,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0","member":1}"#,
        #"{"op":"checkin.answer","ref":21,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0"}"#,
        #"{"op":"checkin.home","ref":22,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0","for_s":60}"#,
        #"{"op":"checkin.close","ref":23,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0"}"#,
        #"{"op":"checkin.join","ref":24,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","member_token":"m0"}"#,
        #"{"op":"checkin.request","ref":25,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","member_token":"m0"}"#,
        #"{"op":"checkin.leave","ref":26,"circle":"Vt1f0oY3mN2tW0l1qg9vXw"}"#,
        #"{"op":"checkin.register","ref":27,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","member_token":"m0","relay":{"handle":"h"}}"#,
        #"{"op":"checkin.unregister","ref":28,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","owner_token":"t0","subscription":"s"}"#,
        #"{"op":"checkin.ack","ref":29,"circle":"Vt1f0oY3mN2tW0l1qg9vXw","member_token":"m0","notice":"n"}"#,
    ]

    /// The value of one series in a text exposition (`name{labels}` exactly as written).
    static func sample(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), line[..<space] == series else { continue }
            return Double(line[line.index(after: space)...])
        }
        return nil
    }

    @Test func everyOperationIsCountedUnderItsWireNameAndAScrapeCountsNothingTwice() throws {
        let h = try ServerHarness()
        let client = try h.open()
        for request in Self.oneOfEach { client.send(request) }
        try h.read(client, count: Self.oneOfEach.count)
        let first = try h.get("/metrics", admin: true)
        #expect(first.status == 200)
        for name in ClientOperation.names {
            #expect(Self.sample(first.body, #"vigil_requests_total{op="\#(name)"}"#) == 1, "\(name)")
        }
        // Unknown pins and streams are answered forbidden / not_found, and counted by code.
        let errors = client.messages.filter { $0.type == "error" }.count
        let counted = first.body.split(separator: "\n").filter { $0.hasPrefix("vigil_request_errors_total{") }
            .compactMap { Double($0.split(separator: " ").last!) }.reduce(0, +)
        #expect(errors > 0 && Double(errors) == counted)
        #expect(Self.sample(first.body, "vigil_messages_received_total") == Double(Self.oneOfEach.count))
        let second = try h.get("/metrics", admin: true)
        for name in ClientOperation.names {
            #expect(Self.sample(second.body, #"vigil_requests_total{op="\#(name)"}"#) == 1, "\(name)")
        }
        #expect(Self.sample(second.body, "vigil_messages_received_total") == Double(Self.oneOfEach.count))
    }

    @Test func gaugesAndStatsFollowPinsSubscriptionsStreamsAndWatchers() throws {
        let h = try ServerHarness()
        let map = try h.open(), owner = try h.open(), watcher = try h.open()
        map.send(#"{"op":"subscribe","ref":1,"area":{"bbox":[52.3,13.0,52.7,13.8]}}"#)
        try h.read(map, count: 1)
        owner.send(#"{"op":"pin.create","ref":2,"pin":{"lat":52.52,"lon":13.405,"title":"Fox"}}"#)
        owner.send(#"{"op":"panic.start","ref":3,"status":"red","lat":52.52,"lon":13.405,"watchers":1}"#)
        try h.read(owner, count: 2)
        let started = try #require(owner.messages.first { $0["ref"]?.int == 3 })
        let stream = try #require(started["stream"]?.string)
        let token = try #require(started["watch_tokens"]?.array?.first?.string)
        watcher.send(#"{"op":"panic.watch","ref":4,"stream":"\#(stream)","watch_token":"\#(token)"}"#)
        try h.read(watcher, count: 1)
        try h.read(map, count: 2)  // the subscribe's reply, then the pin's event

        let stats = try h.get("/stats", admin: true)
        let json = try #require(try JSONParser.parse(Array(stats.body.utf8)).object)
        #expect(json["pins"]?.int == 1)
        #expect(json["subscriptions"]?.int == 1)
        #expect(json["websockets"]?.int == 3)
        #expect(json["panic"]?.object?["active"]?.int == 1)
        #expect(json["panic"]?.object?["watchers"]?.int == 1)
        #expect(json["connections"]?.object?["open"]?.int == 3)
        #expect(json["connections"]?.object?["admin"]?.int == 1)
        #expect(json["totals"]?.object?["deliveries"]?.int ?? 0 >= 1)

        let metrics = try h.get("/metrics", admin: true).body
        #expect(Self.sample(metrics, "vigil_pins") == 1)
        #expect(Self.sample(metrics, #"vigil_panic_streams{state="active"}"#) == 1)
        #expect(Self.sample(metrics, "vigil_panic_watchers") == 1)
        #expect(Self.sample(metrics, "vigil_channels") ?? 0 >= 1)
        #expect(Self.sample(metrics, #"vigil_connections{state="open",transport="plain"}"#) == 3)
        // The pin event reached its one subscriber: one event of one recipient at least.
        #expect(Self.sample(metrics, #"vigil_fanout_recipients_bucket{le="1.0"}"#) ?? 0 >= 1)
        #expect(Self.sample(metrics, "vigil_fanout_recipients_count") == Self.sample(metrics, "vigil_events_total"))
    }

    @Test func closesAreCountedByCodeAndConnectionsByHowTheyEnded() throws {
        let h = try ServerHarness()
        let client = try h.open("/echo")
        client.write(client.frame(.close, FrameEncoder.closePayload(code: .normal, reason: "bye")))
        try h.run(until: { client.poll(); return client.ended })
        shutdown(client.fd, Int32(SHUT_WR))
        try h.run(until: { h.server.connectionCount == 0 })
        let bad = try h.open("/echo")
        bad.write(FrameEncoder.frame(opcode: .text, payload: Array("unmasked".utf8)))
        try h.run(until: { bad.poll(); return bad.ended })
        let metrics = try h.get("/metrics", admin: true).body
        #expect(Self.sample(metrics, #"vigil_websocket_closes_total{direction="received",code="1000"}"#) == 1)
        #expect(Self.sample(metrics, #"vigil_websocket_closes_total{direction="sent",code="1000"}"#) == 1)
        #expect(Self.sample(metrics, #"vigil_websocket_closes_total{direction="sent",code="1002"}"#) == 1)
        #expect(Self.sample(metrics, #"vigil_connections_closed_total{reason="closed"}"#) == 1)
    }

    @Test func closeCodesBecomeAFixedSetOfLabels() {
        #expect(OperatorMetrics.closeCodeLabel(1000) == "1000")
        #expect(OperatorMetrics.closeCodeLabel(1013) == "1013")
        #expect(OperatorMetrics.closeCodeLabel(3007) == "3xxx")
        #expect(OperatorMetrics.closeCodeLabel(4999) == "4xxx")
        #expect(OperatorMetrics.closeCodeLabel(2000) == "other")
    }

    @Test func thePublicHealthSaysOnlyOkAndTheDetailIsOnTheAdminListener() throws {
        let h = try ServerHarness()
        _ = try h.open()
        let publicHealth = try h.get("/healthz")
        #expect(publicHealth.status == 200)
        #expect(publicHealth.body == #"{"status":"ok"}"# + "\n")
        let admin = try h.get("/healthz", admin: true)
        let json = try #require(try JSONParser.parse(Array(admin.body.utf8)).object)
        #expect(json["status"]?.string == "ok" && json["websockets"]?.int == 1 && json["state"]?.string == "memory_only")
        // The operator's endpoints are not on the public listener, and the admin one has no WebSocket.
        #expect(try h.get("/metrics").status == 404)
        #expect(try h.get("/stats").status == 404)
        #expect(try h.get("/v1", admin: true).status == 404)
    }

    @Test func theAdminListenerAnswersWhenClientsHoldEveryConnection() throws {
        let h = try ServerHarness { $0.maxConnections = 1 }
        _ = try h.open()
        let refused = h.connect()
        try h.run(until: { refused.poll(); return refused.ended })
        let metrics = try h.get("/metrics", admin: true)
        #expect(metrics.status == 200)
        #expect(Self.sample(metrics.body, #"vigil_connections_refused_total{reason="capacity"}"#) == 1)
    }

    /// Records log events (message and metadata) for assertions.
    final class Recorder: @unchecked Sendable {
        let events = Mutex<[(Logger.Level, String, Logger.Metadata)]>([])
        struct Handler: LogHandler {
            let recorder: Recorder
            var logLevel: Logger.Level = .trace
            var metadata: Logger.Metadata = [:]
            subscript(metadataKey key: String) -> Logger.Metadata.Value? { get { metadata[key] } set { metadata[key] = newValue } }
            func log(event: LogEvent) {
                recorder.events.withLock { $0.append((event.level, event.message.description, event.metadata ?? [:])) }
            }
        }
        var logger: Logger {
            var l = Logger(label: "test") { _ in Handler(recorder: self) }
            l.logLevel = .trace
            return l
        }
    }

    @Test func theSummaryLineCountsWhatChangedAndNamesNoOne() throws {
        let recorder = Recorder()
        let h = try ServerHarness(logger: recorder.logger)
        let client = try h.open()
        client.send(#"{"op":"pin.create","ref":1,"pin":{"lat":52.52,"lon":13.405,"title":"Fox"}}"#)
        try h.read(client, count: 1)
        h.server.logSummary()
        client.send(#"{"op":"unsubscribe","ref":2}"#)
        try h.read(client, count: 2)
        h.server.logSummary()
        let summaries = recorder.events.withLock { $0.filter { $0.1 == "summary" } }
        #expect(summaries.count == 2)
        #expect(summaries.allSatisfy { $0.0 == .info })
        #expect(summaries.map { $0.2["messages_in"]?.description } == ["1", "1"])
        #expect(summaries.map { $0.2["pins"]?.description } == ["1", "1"])
        let keys = Set(summaries.flatMap { $0.2.keys })
        #expect(keys == ["connections", "websockets", "messages_in", "deliveries", "refusals", "pins", "streams", "state", "closes"])
        // Per-connection closes are debug lines with a reason and a code, nothing else.
        client.write(client.frame(.close, FrameEncoder.closePayload(code: .normal, reason: "bye")))
        try h.run(until: { client.poll(); return client.ended })
        shutdown(client.fd, Int32(SHUT_WR))
        try h.run(until: { h.server.connectionCount == 0 })
        let closes = recorder.events.withLock { $0.filter { $0.1 == "connection closed" } }
        #expect(closes.count == 1 && closes[0].0 == .debug)
        #expect(closes.first.map { Set($0.2.keys) } == ["reason", "close_code"])
        #expect(closes.first?.2["reason"]?.description == "closed")
    }
}
