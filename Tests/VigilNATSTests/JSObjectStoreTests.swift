import Testing
import VigilCore
@testable import VigilNATS

@Suite struct JSObjectStoreTests {
    // MARK: base64

    @Test func base64MatchesRFC4648sVectorsInBothAlphabets() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(NATSBase64.encode(Array(plain.utf8), alphabet: .standard) == encoded)
            #expect(NATSBase64.decode(encoded.utf8, alphabet: .standard) == Array(plain.utf8))
            #expect(NATSBase64.decode(encoded.utf8.filter { $0 != UInt8(ascii: "=") }, alphabet: .url) == Array(plain.utf8))
        }
        // The two alphabets differ in the last two characters only.
        #expect(NATSBase64.encode([0xFB, 0xFF], alphabet: .standard) == "+/8=")
        #expect(NATSBase64.encode([0xFB, 0xFF], alphabet: .url) == "-_8=")
        #expect(NATSBase64.encode([0xFB, 0xFF], alphabet: .url, padded: false) == "-_8")
        #expect(NATSBase64.decode("-_8=".utf8, alphabet: .url) == [0xFB, 0xFF])
        #expect(NATSBase64.decode("-_8=".utf8, alphabet: .standard) == nil)
        #expect(NATSBase64.decode("+/8=".utf8, alphabet: .url) == nil)
    }

    @Test func base64DecodingIsStrict() {
        for bad in ["Z", "Zg=", "Zg===", "Zh==", "Zm9=", "Zm9v\n", "Zm 9v", "=Zg=", "Zg==Zg==", "Z===", "\u{e9}"] {
            #expect(NATSBase64.decode(bad.utf8, alphabet: .standard) == nil, "accepted \(bad)")
        }
        var rng = SystemRandomNumberGenerator()
        for n in 0..<40 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
            for alphabet in [NATSBase64.Alphabet.standard, .url] {
                for padded in [true, false] {
                    #expect(NATSBase64.decode(NATSBase64.encode(bytes, alphabet: alphabet, padded: padded).utf8, alphabet: alphabet) == bytes)
                }
            }
        }
    }

    // MARK: layout

    @Test func namesAndSubjectsFollowTheObjectStoreLayout() {
        #expect(JSObjectStore.streamName(bucket: "VIGIL_SNAPSHOTS") == "OBJ_VIGIL_SNAPSHOTS")
        #expect(JSObjectStore.encodeName("latest") == "bGF0ZXN0")
        #expect(JSObjectStore.encodeName("a") == "YQ==")
        #expect(JSObjectStore.encodeName("a/b?") == "YS9iPw==")  // '/' and '?' in the name stay out of the subject
        #expect(JSObjectStore.metaSubject(bucket: "B", name: "latest") == "$O.B.M.bGF0ZXN0")
        #expect(JSObjectStore.chunkSubject(bucket: "B", nuid: "abc") == "$O.B.C.abc")
        #expect(JSObjectStore.subjects(bucket: "B") == ["$O.B.C.>", "$O.B.M.>"])
        for name in ["latest", "a", "with space.and.dots", "ünïcödé", String(repeating: "x", count: 300)] {
            #expect(NATSSubject.problem(JSObjectStore.metaSubject(bucket: "B", name: name), wildcards: false) == nil)
        }
        #expect(JSObjectStore.isBucketName("VIGIL_SNAPSHOTS") && JSObjectStore.isBucketName("a-b"))
        #expect(!JSObjectStore.isBucketName("") && !JSObjectStore.isBucketName("a.b") && !JSObjectStore.isBucketName("a b")
                && !JSObjectStore.isBucketName(String(repeating: "x", count: 65)))
        var rng = SystemRandomNumberGenerator()
        let nuid = JSObjectStore.makeNUID(using: &rng)
        #expect(nuid.utf8.count == 22 && NATSSubject.isToken(nuid) && nuid != JSObjectStore.makeNUID(using: &rng))
    }

    @Test func bucketConfigIsTheObjectStoresStream() throws {
        let config = JSObjectStoreConfig(bucket: "V_SNAPSHOTS", description: "d", replicas: 3, maxBytes: 1 << 30)
        let object = try #require(try JSONParser.parse(config.encode()).object)
        #expect(object["name"] == .string("OBJ_V_SNAPSHOTS") && object["description"] == .string("d"))
        #expect(object["subjects"] == .array([.string("$O.V_SNAPSHOTS.C.>"), .string("$O.V_SNAPSHOTS.M.>")]))
        #expect(object["num_replicas"]?.int64 == 3 && object["max_bytes"]?.int64 == 1 << 30 && object["max_age"]?.int64 == 0)
        #expect(object["discard"] == .string("new") && object["allow_rollup_hdrs"] == .bool(true) && object["allow_direct"] == .bool(true))
        // The cluster's own stream keeps its config: none of the object store's settings leak into it.
        let plain = try #require(try JSONParser.parse(JSStreamConfig(name: "V", subjects: ["V.>"], maxAgeSeconds: 1, maxBytes: 1).encode()).object)
        #expect(plain["discard"] == .string("old") && plain["allow_rollup_hdrs"] == nil && plain["description"] == nil)
    }

    @Test func anExistingStreamMustBeTheBucketsToBeUsed() {
        let config = JSObjectStoreConfig(bucket: "V_SNAPSHOTS")
        func info(_ fields: String) -> [UInt8] {
            Array(#"{"config":{"name":"OBJ_V_SNAPSHOTS",\#(fields)},"state":{"messages":0,"bytes":0,"first_seq":0,"last_seq":0}}"#.utf8)
        }
        let subjects = #""subjects":["$O.V_SNAPSHOTS.M.>","$O.V_SNAPSHOTS.C.>"]"#
        #expect(config.problem(existing: info(subjects + #","allow_rollup_hdrs":true,"allow_direct":true,"num_replicas":3"#)) == nil)
        #expect(config.problem(existing: info(subjects + #","allow_rollup_hdrs":true"#))?.contains("allow_direct") == true)
        #expect(config.problem(existing: info(subjects + #","allow_direct":true"#))?.contains("allow_rollup_hdrs") == true)
        #expect(config.problem(existing: info(#""subjects":["ELSE.>"],"allow_rollup_hdrs":true,"allow_direct":true"#))?.contains("subjects") == true)
        #expect(config.problem(existing: Array("{}".utf8)) != nil)
        // What this store creates passes its own check.
        let created = String(decoding: config.encode(), as: UTF8.self)
        #expect(config.problem(existing: Array("{\"config\":\(created)}".utf8)) == nil)
    }

    // MARK: digest

    @Test func digestsAreSHA256InPaddedBase64URL() {
        // SHA-256 of nothing (FIPS 180-2), as the official clients write it.
        let empty: [UInt8] = [0xE3, 0xB0, 0xC4, 0x42, 0x98, 0xFC, 0x1C, 0x14, 0x9A, 0xFB, 0xF4, 0xC8, 0x99, 0x6F, 0xB9, 0x24,
                              0x27, 0xAE, 0x41, 0xE4, 0x64, 0x9B, 0x93, 0x4C, 0xA4, 0x95, 0x99, 0x1B, 0x78, 0x52, 0xB8, 0x55]
        #expect(JSObjectDigest.format(sha256: empty) == "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=")
        #expect(JSObjectDigest.parse("SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=") == empty)
        #expect(JSObjectDigest.parse("SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU") == empty)
        for bad in ["", "SHA-256=", "SHA-512=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=", "sha-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=",
                    "SHA-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hS"] {
            #expect(JSObjectDigest.parse(bad) == nil, "accepted \(bad)")
        }
    }

    // MARK: meta

    private var sample: JSObjectInfo {
        JSObjectInfo(name: "latest", bucket: "V_SNAPSHOTS", nuid: "CkuyLEX4z2hbyjj1aWCfiH", size: 300_000, chunks: 3,
                     digest: "SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=",
                     metadata: SnapshotMetadata(replicatedSequence: 42, nodeID: "n1", formatVersion: 3, takenAtMs: 1_764_000_000_000).entries,
                     maxChunkSize: 131_072)
    }

    @Test func metaRoundTripsAndReadsWhatTheOfficialClientsWrite() throws {
        var info = sample
        info.description = "Vigil snapshot"
        info.headers = ["K": ["a", "b"]]
        #expect(try JSObjectInfo.decode(info.encode()).get() == info)
        let written = try #require(try JSONParser.parse(info.encode()).object)
        #expect(written["mtime"] == nil && written["metadata"]?.object?["cluster_sequence"] == .string("42"))
        #expect(written["options"]?.object?["max_chunk_size"]?.int64 == 131_072)

        // As Go's encoding/json writes an ObjectInfo (mtime zero, the options, headers and metadata).
        let go = #"{"name":"latest","description":"x","headers":{"K":["v"]},"metadata":{"cluster_sequence":"7","node_id":"n2","format_version":"3","taken_at_ms":"5"},"options":{"max_chunk_size":131072},"bucket":"V_SNAPSHOTS","nuid":"CkuyLEX4z2hbyjj1aWCfiH","size":5,"mtime":"0001-01-01T00:00:00Z","chunks":1,"digest":"SHA-256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU="}"#
        let read = try JSObjectInfo.decode(Array(go.utf8)).get()
        #expect(read.size == 5 && read.chunks == 1 && read.headers == ["K": ["v"]] && read.description == "x")
        #expect(SnapshotMetadata(entries: read.metadata) == SnapshotMetadata(replicatedSequence: 7, nodeID: "n2", formatVersion: 3, takenAtMs: 5))
        // A deleted object's meta (`nats object rm`) has no digest and no size.
        let deleted = #"{"name":"latest","bucket":"V_SNAPSHOTS","nuid":"N","size":0,"chunks":0,"deleted":true}"#
        #expect(try JSObjectInfo.decode(Array(deleted.utf8)).get().deleted)
    }

    @Test func metaThatBreaksARuleIsRefusedWithWhatWasWrong() throws {
        func refused(_ edit: (inout JSONObject) -> Void) -> String? {
            guard case .object(var object) = try? JSONParser.parse(sample.encode()) else { return "sample" }
            edit(&object)
            var writer = JSONWriter()
            writer.value(.object(object))
            if case .failure(let error) = JSObjectInfo.decode(writer.bytes) { return error.description }
            return nil
        }
        func set(_ key: String, _ value: JSONValue) -> (inout JSONObject) -> Void {
            { object in
                object.members.removeAll { $0.key == key }
                object.members.append((key: key, value: value))
            }
        }
        #expect(refused(set("nuid", .string("a.b")))?.contains("nuid") == true)
        #expect(refused(set("nuid", .string(">")))?.contains("nuid") == true)
        #expect(refused(set("nuid", .string(String(repeating: "n", count: 65)))) != nil)
        #expect(refused(set("size", .number(-1)))?.contains("size") == true)
        #expect(refused(set("size", .number(1.5))) != nil)
        #expect(refused(set("chunks", .number(300_001)))?.contains("chunks") == true)
        #expect(refused(set("size", .number(0)))?.contains("chunks") == true)
        #expect(refused(set("digest", .string("MD5=abc")))?.contains("digest") == true)
        #expect(refused(set("bucket", .string("a.b"))) != nil)
        #expect(refused(set("name", .string(""))) != nil)
        #expect(refused(set("metadata", .object(JSONObject([("k", .number(1))]))))?.contains("metadata") == true)
        #expect(refused(set("metadata", .string("x"))) != nil)
        #expect(refused(set("headers", .object(JSONObject([("k", .string("v"))])))) != nil)
        #expect(refused(set("options", .object(JSONObject([("max_chunk_size", .number(-5))])))) != nil)
        #expect(refused { $0.members.removeAll { $0.key == "nuid" } } != nil)
        #expect(refused { _ in } == nil)
        let oversized = Array("{\"name\":\"\(String(repeating: "x", count: 70_000))\"}".utf8)
        guard case .failure(let error) = JSObjectInfo.decode(oversized) else { Issue.record("an oversized meta was read"); return }
        #expect(error.description.contains("longer than"))
        guard case .failure = JSObjectInfo.decode(Array("[1]".utf8)) else { Issue.record("an array was read"); return }
    }

    @Test func snapshotMetadataNeedsEveryEntry() {
        let metadata = SnapshotMetadata(replicatedSequence: 18_446_744_073_709_551_615, nodeID: "node-7", formatVersion: 3, takenAtMs: -1)
        #expect(SnapshotMetadata(entries: metadata.entries) == metadata)
        for key in metadata.entries.keys {
            var entries = metadata.entries
            entries[key] = nil
            #expect(SnapshotMetadata(entries: entries) == nil, "read without \(key)")
            entries[key] = "x"
            if key != "node_id" { #expect(SnapshotMetadata(entries: entries) == nil, "read \(key) = x") }
        }
        var long = metadata.entries
        long["node_id"] = String(repeating: "n", count: 129)
        #expect(SnapshotMetadata(entries: long) == nil)
    }

    // MARK: MSG.GET and PURGE replies

    @Test func readsStoredMessagesAndPurgeReplies() throws {
        let headers = NATSBase64.encode(Array("NATS/1.0\r\nNats-Rollup: sub\r\n\r\n".utf8), alphabet: .standard)
        let data = NATSBase64.encode(Array("{\"a\":1}".utf8), alphabet: .standard)
        let reply = #"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"$O.B.M.bGF0ZXN0","seq":26,"hdrs":"\#(headers)","data":"\#(data)","time":"2026-11-25T23:00:00.123Z"}}"#
        let message = try JSStoredMessage.decode(Array(reply.utf8)).get()
        #expect(message == JSStoredMessage(subject: "$O.B.M.bGF0ZXN0", sequence: 26, headers: NATSHeaders(fields: [(name: "Nats-Rollup", value: "sub")]),
                                           data: Array("{\"a\":1}".utf8), time: "2026-11-25T23:00:00.123Z"))
        let none = #"{"type":"x","error":{"code":404,"err_code":10037,"description":"no message found"}}"#
        guard case .failure(let error) = JSStoredMessage.decode(Array(none.utf8)) else { Issue.record("no error"); return }
        #expect(error.errorCode == JSAPI.noMessageFound)
        for bad in [#"{"message":{"subject":"a","seq":1,"data":"!!"}}"#, #"{"message":{"subject":"a","seq":0}}"#,
                    #"{"message":{"subject":"a b","seq":1}}"#, #"{"message":{"subject":"a","seq":1,"hdrs":"Zm9v"}}"#, #"{}"#] {
            guard case .failure(let e) = JSStoredMessage.decode(Array(bad.utf8)) else { Issue.record("read \(bad)"); continue }
            #expect(e.code == 0)
        }
        #expect(try JSONParser.parse(JSStoredMessage.lastBySubjectRequest("$O.B.M.x")) == .object(JSONObject([("last_by_subj", .string("$O.B.M.x"))])))
        #expect(try JSPurge.decodePurged(Array(#"{"success":true,"purged":24}"#.utf8)).get() == 24)
        guard case .failure = JSPurge.decodePurged(Array(#"{"success":false}"#.utf8)) else { Issue.record("a failed purge read as success"); return }
        #expect(try JSONParser.parse(JSPurge.request(filter: "$O.B.C.n")) == .object(JSONObject([("filter", .string("$O.B.C.n"))])))
    }

    // MARK: assembly

    @Test func assemblyKeepsToTheMetasChunksAndBytes() {
        var info = sample
        info.size = 10
        info.chunks = 3
        var a = JSObjectAssembly(info: info, maxChunkBytes: 4)
        #expect(a.add([1, 2, 3, 4]) == .more && a.add([5, 6, 7, 8]) == .more)
        guard case .incomplete = a.finish() else { Issue.record("two of three chunks were complete"); return }
        #expect(a.add([9, 10]) == .more && a.isComplete)
        #expect(a.finish() == .complete)
        #expect(a.takeBytes() == Array(1...10))

        // One chunk more than announced, even once the sizes add up: not this object.
        guard case .corrupt(let why) = a.add([11]) else { Issue.record("a trailing chunk was taken"); return }
        #expect(why.contains("more than the 3 chunks"))

        var big = JSObjectAssembly(info: info, maxChunkBytes: 4)
        guard case .corrupt = big.add([1, 2, 3, 4, 5]) else { Issue.record("an oversized chunk was kept"); return }
        #expect(big.bytes.isEmpty)

        var over = JSObjectAssembly(info: info, maxChunkBytes: 8)
        _ = over.add([1, 2, 3, 4, 5, 6, 7, 8])
        guard case .corrupt = over.add([1, 2, 3]) else { Issue.record("bytes past the size were kept"); return }
        #expect(over.bytes.count == 8)

        var short = JSObjectAssembly(info: info, maxChunkBytes: 4)
        _ = short.add([1, 2, 3, 4])
        _ = short.add([1, 2])
        guard case .corrupt = short.add([1, 2]) else { Issue.record("too few bytes in all chunks accepted"); return }

        var empty = info
        empty.size = 0
        empty.chunks = 0
        #expect(JSObjectAssembly(info: empty, maxChunkBytes: 4).finish() == .complete)
        var none = JSObjectAssembly(info: empty, maxChunkBytes: 4)
        guard case .corrupt = none.add([]) else { Issue.record("a chunk for an empty object was taken"); return }
    }

    @Test func directGetRepliesAreReadFromTheirHeaders() throws {
        let found = NATSMessage(subject: "_INBOX.x.1", sid: 0, headers: NATSHeaders(fields: [
            (name: "Nats-Stream", value: "OBJ_B"), (name: "Nats-Subject", value: "$O.B.C.n"), (name: "Nats-Sequence", value: "42"),
            (name: "Nats-Time-Stamp", value: "2026-11-25T23:00:00Z")]), payload: [1, 2, 3])
        #expect(try JSDirectGet.decode(found).get() == .message(subject: "$O.B.C.n", sequence: 42, data: [1, 2, 3]))
        let missing = NATSMessage(subject: "_INBOX.x.1", sid: 0, headers: NATSHeaders(status: 404, statusDescription: "Message Not Found"), payload: [])
        #expect(try JSDirectGet.decode(missing).get() == .notFound)
        let refused = NATSMessage(subject: "_INBOX.x.1", sid: 0, headers: NATSHeaders(status: 408, statusDescription: "Bad Request"), payload: [])
        guard case .failure(let e) = JSDirectGet.decode(refused) else { Issue.record("a 408 was read"); return }
        #expect(e.code == 408)
        for fields in [[(name: "Nats-Subject", value: "$O.B.C.n")], [(name: "Nats-Sequence", value: "1")],
                       [(name: "Nats-Subject", value: "a b"), (name: "Nats-Sequence", value: "1")],
                       [(name: "Nats-Subject", value: "a"), (name: "Nats-Sequence", value: "99999999999999999999")],
                       [(name: "Nats-Subject", value: "a"), (name: "Nats-Sequence", value: "0")]] {
            guard case .failure = JSDirectGet.decode(NATSMessage(subject: "i", sid: 0, headers: NATSHeaders(fields: fields), payload: [])) else {
                Issue.record("read \(fields)"); continue
            }
        }
        guard case .failure = JSDirectGet.decode(NATSMessage(subject: "i", sid: 0, payload: [1])) else { Issue.record("read a plain message"); return }
        #expect(try JSONParser.parse(JSDirectGet.request(nextBySubject: "$O.B.C.n", from: 7))
                == .object(JSONObject([("seq", .number(7)), ("next_by_subj", .string("$O.B.C.n"))])))
    }
}
