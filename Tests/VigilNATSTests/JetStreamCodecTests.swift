import Testing
import VigilCore
@testable import VigilNATS

@Suite struct JetStreamCodecTests {
    @Test func streamConfigNamesItsSubjectsAndBounds() throws {
        let config = JSStreamConfig(name: "VIGIL", subjects: ["VIGIL.>"], replicas: 3, maxAgeSeconds: 86_400, maxBytes: 1 << 30)
        let object = try #require(try JSONParser.parse(config.encode()).object)
        #expect(object["name"] == .string("VIGIL") && object["subjects"] == .array([.string("VIGIL.>")]))
        #expect(object["storage"] == .string("file") && object["num_replicas"]?.int64 == 3)
        #expect(object["max_age"]?.int64 == 86_400_000_000_000 && object["max_bytes"]?.int64 == 1 << 30)
        #expect(object["discard"] == .string("old") && object["retention"] == .string("limits"))
    }

    @Test func decodesStreamInfoAndErrors() throws {
        let reply = #"{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"V","subjects":["V.>"],"num_replicas":3},"state":{"messages":3,"bytes":120,"first_seq":1,"last_seq":3},"cluster":{"name":"C","leader":"s2"}}"#
        #expect(try JSStreamInfo.decode(Array(reply.utf8)).get() == JSStreamInfo(
            name: "V", subjects: ["V.>"], replicas: 3, messages: 3, bytes: 120, firstSequence: 1, lastSequence: 3, leader: "s2"))
        let missing = #"{"type":"x","error":{"code":404,"err_code":10059,"description":"stream not found"}}"#
        guard case .failure(let error) = JSStreamInfo.decode(Array(missing.utf8)) else { Issue.record("no error"); return }
        #expect(error == JSAPIError(code: 404, errorCode: JSAPI.streamNotFound, description: "stream not found"))
        guard case .failure(let garbage) = JSStreamInfo.decode(Array("nope".utf8)) else { Issue.record("no error"); return }
        #expect(garbage.code == 0)
    }

    @Test func decodesEverySettingOfTheStream() throws {
        let reply = #"{"config":{"name":"V","subjects":["V.>"],"retention":"interest","storage":"memory","num_replicas":1,"max_age":3600000000000,"max_bytes":1024,"discard":"new","duplicate_window":60000000000},"state":{"messages":0,"bytes":0,"first_seq":0,"last_seq":0}}"#
        let info = try JSStreamInfo.decode(Array(reply.utf8)).get()
        #expect(info.settings == JSStreamSettings(subjects: ["V.>"], retention: "interest", storage: "memory", replicas: 1,
                                                 maxAgeNanoseconds: 3_600_000_000_000, maxBytes: 1024, discard: "new",
                                                 duplicateWindowNanoseconds: 60_000_000_000))
    }

    /// The stream as `config.encode()` would create it, as STREAM.INFO reports it.
    private func created(_ config: JSStreamConfig) throws -> JSStreamInfo {
        let body = String(decoding: config.encode(), as: UTF8.self)
        let reply = #"{"config":"# + body + #","state":{"messages":0,"bytes":0,"first_seq":0,"last_seq":0}}"#
        return try JSStreamInfo.decode(Array(reply.utf8)).get()
    }

    @Test func aStreamCreatedFromTheConfigDiffersInNothing() throws {
        let config = JSStreamConfig(name: "V", subjects: ["V.>"], replicas: 3, maxAgeSeconds: 86_400, maxBytes: 1 << 30)
        #expect(config.differences(from: try created(config)) == [])
        var reordered = try created(JSStreamConfig(name: "V", subjects: ["V.b", "V.a"], maxAgeSeconds: 1, maxBytes: 1))
        reordered.subjects = ["V.a", "V.b"]
        #expect(JSStreamConfig(name: "V", subjects: ["V.b", "V.a"], maxAgeSeconds: 1, maxBytes: 1).differences(from: reordered) == [])
    }

    @Test func replicasSetAfterTheStreamExistsIsADifferenceThatAnUpdateFixes() throws {
        let config = JSStreamConfig(name: "V", subjects: ["V.>"], replicas: 3, maxAgeSeconds: 86_400, maxBytes: 1 << 30)
        var one = config
        one.replicas = 1
        #expect(config.differences(from: try created(one)) == [
            JSStreamDifference(key: "replicas", config: .number(3), stream: .number(1), updatable: true, breaksCorrectness: false)])
    }

    @Test func eachSettingIsComparedAndClassified() throws {
        let config = JSStreamConfig(name: "V", subjects: ["V.>"], replicas: 1, maxAgeSeconds: 60, maxBytes: 100)
        var stream = try created(config)
        stream.subjects = ["ELSE.>"]
        stream.retention = "workqueue"
        stream.storage = "memory"
        stream.replicas = 5
        stream.maxAgeNanoseconds = 61_000_000_000
        stream.maxBytes = 200
        stream.discard = "new"
        stream.duplicateWindowNanoseconds = 30_000_000_000
        let found = config.differences(from: stream)
        #expect(found.map(\.key) == JSStreamSettings.keys)
        #expect(found.filter(\.breaksCorrectness).map(\.key) == ["subjects", "retention", "storage", "duplicate_window"])
        #expect(found.filter(\.updatable).map(\.key) == ["replicas", "max_age", "max_bytes", "discard", "duplicate_window"])
        #expect(found[0].stream == .list(["ELSE.>"]) && found[4].config == .number(60) && found[4].stream == .number(61))
        // A longer de-duplication window than asked for only costs memory on the servers.
        var longer = try created(config)
        longer.duplicateWindowNanoseconds = 600_000_000_000
        #expect(config.differences(from: longer).map { [$0.key, "\($0.breaksCorrectness)"] } == [["duplicate_window", "false"]])
    }

    @Test func aDifferenceIsOneJSONObject() throws {
        var w = JSONWriter(capacity: 64)
        JSStreamDifference(key: "replicas", config: .number(3), stream: .number(1), updatable: true, breaksCorrectness: false).write(into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"key":"replicas","config":3,"stream":1,"updatable":true}"#)
    }

    @Test func decodesPublishAcks() throws {
        #expect(try JSPubAck.decode(Array(#"{"stream":"V","seq":42}"#.utf8)).get() == JSPubAck(stream: "V", sequence: 42))
        #expect(try JSPubAck.decode(Array(#"{"stream":"V","seq":42,"duplicate":true}"#.utf8)).get().duplicate)
        guard case .failure = JSPubAck.decode(Array(#"{"stream":"V"}"#.utf8)) else { Issue.record("accepted an ack without seq"); return }
        guard case .failure(let e) = JSPubAck.decode(Array(#"{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}"#.utf8)) else {
            Issue.record("accepted an error"); return
        }
        #expect(e.code == 503)
    }

    @Test func orderedConsumerConfigStartsWhereAsked() throws {
        let fromStart = try #require(try JSONParser.parse(JSOrderedConsumerConfig(stream: "V", deliverSubject: "_INBOX.a", startSequence: 1).encode()).object)
        #expect(fromStart["config"]?.object?["deliver_policy"] == .string("all"))
        let config = JSOrderedConsumerConfig(stream: "V", deliverSubject: "_INBOX.a", startSequence: 17, heartbeatMs: 2000)
        let object = try #require(try JSONParser.parse(config.encode()).object?["config"]?.object)
        #expect(object["deliver_policy"] == .string("by_start_sequence") && object["opt_start_seq"]?.int64 == 17)
        #expect(object["ack_policy"] == .string("none") && object["flow_control"] == .bool(true))
        #expect(object["idle_heartbeat"]?.int64 == 2_000_000_000 && object["mem_storage"] == .bool(true))
    }

    @Test func readsDeliveryInfoFromBothReplyForms() throws {
        let v1 = try #require(JSDeliveryInfo(replySubject: "$JS.ACK.V.c1.1.40.3.1700000000000000000.7"))
        #expect(v1.stream == "V" && v1.consumer == "c1" && v1.streamSequence == 40 && v1.consumerSequence == 3 && v1.pending == 7)
        let v2 = try #require(JSDeliveryInfo(replySubject: "$JS.ACK.dom.ACCHASH.V.c1.1.41.4.1700000000000000000.6.rnd"))
        #expect(v2.streamSequence == 41 && v2.consumerSequence == 4)
        #expect(JSDeliveryInfo(replySubject: "$JS.ACK.V.c1.1.x.3.1.7") == nil)
        // 20 digits past UInt64.max (found by the fuzzer: it trapped), and the largest that fits.
        #expect(JSDeliveryInfo(replySubject: "$JS.ACK.V.c.1.4.1.21700000000000000000.0") == nil)
        #expect(JSDeliveryInfo(replySubject: "$JS.ACK.V.c.1.4.1.18446744073709551615.0")?.timestampNs == UInt64.max)
        #expect(JSDeliveryInfo(replySubject: "_INBOX.a.b") == nil)
    }
}
