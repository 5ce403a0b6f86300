import Testing
@testable import VigilCore
@testable import VigilState

@Suite struct StateInspectorTests {
    func lines(_ path: String, entries: Bool = true, content: Bool = false) throws -> [JSONObject] {
        var out: [String] = []
        try StateInspector.inspect(path: path, entries: entries, content: content) { out.append($0) }
        return try out.map { line in
            #expect(!line.contains("\n"))
            let value = try JSONParser.parse(Array(line.utf8))
            return try #require(value.object)
        }
    }

    func fullHex(_ d: TokenDigest) -> String {
        d.bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    /// A directory with the sample snapshot and a journal segment of the sample records, both at `segment`.
    func sampleDirectory(segment: UInt64) throws -> (tmp: TemporaryDirectory, sample: StateSnapshot, records: [JournalRecord]) {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let sample = SnapshotCodecTests.sample()
        try dir.writeSnapshot(SnapshotCodec.encode(sample), segment: segment)
        let records = JournalCodecTests.sampleRecords()
        let file = try dir.openSegment(segment)
        for r in records { file.append(r) }
        try file.close()
        return (tmp, sample, records)
    }

    @Test func describesEveryFileThenItsEntries() throws {
        let (tmp, sample, records) = try sampleDirectory(segment: 42)
        // A torn tail: the inspector reports it and changes nothing.
        var journal = tmp.read("journal-000000000000002a.vgj")
        let goodLength = journal.count
        journal += [9, 0, 0, 0, 1]
        tmp.write("journal-000000000000002a.vgj", journal)

        let out = try lines(tmp.path, content: true)
        #expect(out.count == 1 + sample.pins.count + sample.streams.count + 1 + records.count)
        let head = out[0]
        #expect(head["type"]?.string == "snapshot" && head["file"]?.string == "snapshot-000000000000002a.vgs")
        #expect(head["valid"]?.bool == true && head["pins"]?.int64 == Int64(sample.pins.count)
                && head["streams"]?.int64 == Int64(sample.streams.count) && head["segment"]?.int64 == 42)
        let pin = out[1]
        #expect(pin["type"]?.string == "pin" && pin["id"]?.string == sample.pins[0].id.description && pin["title"]?.string == sample.pins[0].title)
        let stream = out[1 + sample.pins.count]
        #expect(stream["type"]?.string == "stream" && stream["history"]?.array?.count == sample.streams[0].history.count)
        let journalLine = out[1 + sample.pins.count + sample.streams.count]
        #expect(journalLine["type"]?.string == "journal" && journalLine["torn"]?.bool == true)
        #expect(journalLine["valid_length"]?.int64 == Int64(goodLength) && journalLine["torn_bytes"]?.int64 == 5)
        #expect(journalLine["records"]?.int64 == Int64(records.count))
        // The last sample record is a kept answer: its size, never its digests or bytes.
        #expect(out.last?["record"]?.string == "answerKept" && out.last?["sealed_bytes"]?.int64 == 68)
        #expect(out.last?["lookup"] == nil && out.last?["sealed"] == nil)
        #expect(tmp.read("journal-000000000000002a.vgj").count == journal.count, "read-only")
    }

    /// A stream's circle is an id, printed whole as every id is (it opens nothing without a token).
    @Test func aStartForACircleShowsTheCircle() throws {
        let (tmp, _, records) = try sampleDirectory(segment: 3)
        let circles = records.compactMap { r -> String? in if case .panicStart(let s) = r { return s.circle?.description } else { return nil } }
        #expect(circles.count == 2)
        let starts = try lines(tmp.path, content: false).filter { $0["record"]?.string == "panicStart" }
        #expect(starts.compactMap { $0["circle"]?.string } == circles)
        #expect(starts.filter { $0["circle"] == nil }.count == starts.count - 2)
    }

    @Test func digestsAreNeverPrintedWhole() throws {
        let (tmp, sample, _) = try sampleDirectory(segment: 1)
        var text = ""
        try StateInspector.inspect(path: tmp.path) { text += $0 + "\n" }
        var digests = sample.pins.map(\.editDigest) + sample.streams.flatMap { [$0.ownerTokenDigest] + $0.watchTokenDigests }
        for r in JournalCodecTests.sampleRecords() {
            switch r {
            case .panicInvite(_, let d), .panicRevoke(_, let d): digests.append(d)
            case .panicStart(let s): digests.append(s.ownerDigest); digests += s.watchTokens
            default: break
            }
        }
        for d in digests {
            let hex = fullHex(d)
            #expect(!text.contains(String(hex.prefix(9))))
            #expect(text.contains("sha256:\(hex.prefix(8))…"))
        }
        #expect(InspectorLine.shortDigest(TokenDigest(words: (0x0123_4567_89AB_CDEF, 0, 0, 0))) == "sha256:01234567…")
    }

    @Test func damagedAndOddFilesAreDescribedNotFatal() throws {
        let tmp = TemporaryDirectory()
        tmp.write("snapshot-0000000000000001.vgs", [0x89, 0x56, 0x47, 0x53, 1, 2])
        tmp.write("snapshot-0000000000000002.vgs.tmp", [])
        tmp.write("journal-0000000000000001.vgj", [])
        tmp.write("journal-0000000000000002.vgj", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25])
        let out = try lines(tmp.path)
        #expect(out.map { $0["type"]?.string ?? "" } == ["snapshot", "snapshot-temp", "journal", "journal"])
        #expect(out.allSatisfy { $0["valid"]?.bool == false && $0["error"]?.string != nil })
        #expect(out[2]["error"]?.string == "empty file (no header yet)")
        #expect(out[3]["error"]?.string?.hasPrefix("bad header") == true)
    }

    @Test func aSingleFileAndSummariesOnly() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        try dir.writeSnapshot(SnapshotCodec.encode(SnapshotCodecTests.sample()), segment: 3)
        let out = try lines(tmp.file("snapshot-0000000000000003.vgs"), entries: false)
        #expect(out.count == 1 && out[0]["type"]?.string == "snapshot" && out[0]["valid"]?.bool == true)
        #expect(throws: StateError.self) { try lines(tmp.file("missing")) }
    }

    /// By default: counts, sizes, ids, times and short digests, but no coordinates, notes or pin
    /// texts (searched for as the JSON writer would print them); `content` adds them.
    @Test func contentOnlyWhenAskedFor() throws {
        let (tmp, sample, records) = try sampleDirectory(segment: 1)
        func text(content: Bool) throws -> String {
            var out = ""
            try StateInspector.inspect(path: tmp.path, content: content) { out += $0 + "\n" }
            return out
        }
        func json(_ s: String) -> String { var w = JSONWriter(); w.string(s); return String(decoding: w.bytes, as: UTF8.self) }
        func number(_ d: Double) -> String { var w = JSONWriter(); w.double(d); return String(decoding: w.bytes, as: UTF8.self) }
        var secret: [String] = []
        var pins = sample.pins
        var locations = sample.streams.flatMap { s in s.history.all.compactMap { if case .location(let l) = $0.kind { l } else { nil } } }
        for r in records {
            switch r {
            case .pinPut(let p): pins.append(p)
            case .panicStart(let s): locations += s.location.map { [$0] } ?? []; secret += s.note.map { [json($0)] } ?? []
            case .panicEvent(_, let e): if case .location(let l) = e.kind { locations.append(l) }
            default: break
            }
        }
        secret += sample.streams.compactMap(\.note).map(json)
        secret += pins.flatMap { [json($0.title), json($0.description), "\"lat\":" + number($0.point.lat), "\"lon\":" + number($0.point.lon)] }
        secret += locations.flatMap { ["\"lat\":" + number($0.lat), "\"lon\":" + number($0.lon)] }
        secret = secret.filter { $0 != "\"\"" }      // an empty text prints as "" (found anywhere)
        #expect(!locations.isEmpty && !secret.isEmpty)
        let plain = try text(content: false), full = try text(content: true)
        for s in secret {
            #expect(!plain.contains(s), "\(s) printed without --show-content")
            #expect(full.contains(s), "\(s) missing with --show-content")
        }
        // What stays: ids, counts, sizes.
        let out = try lines(tmp.path)
        let pin = try #require(out.first { $0["type"]?.string == "pin" })
        #expect(pin["title_bytes"]?.int64 == Int64(sample.pins[0].title.utf8.count) && pin["lat"] == nil && pin["id"]?.string == sample.pins[0].id.description)
        let stream = try #require(out.first { $0["type"]?.string == "stream" })
        #expect(stream["last"] == nil && stream["history"]?.array?.count == sample.streams[0].history.count)
    }
}
