import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

@Suite struct SnapshotWriterTests {
    @Test func slicesInAnyOrderGiveTheBytesOfEncode() {
        let sample = SnapshotCodecTests.sample()
        var writer = SnapshotWriter(takenAt: sample.takenAt, journalSegment: sample.journalSegment)
        writer.append(sample.streams[0])
        for pin in sample.pins.prefix(3) { writer.append(pin) }
        for stream in sample.streams.dropFirst() { writer.append(stream) }
        for pin in sample.pins.dropFirst(3) { writer.append(pin) }
        #expect(writer.pinsWritten == sample.pins.count)
        let bytes = writer.finish()
        #expect(bytes == SnapshotCodec.encode(sample))
        #expect(writer.byteCount == 0)
    }

    @Test func anEmptyWriterMakesAnEmptySnapshot() throws {
        var writer = SnapshotWriter(takenAt: 3, journalSegment: 4)
        let decoded = try SnapshotCodec.decode(writer.finish())
        #expect(decoded.takenAt == 3 && decoded.journalSegment == 4 && decoded.pins.isEmpty && decoded.streams.isEmpty)
    }

    @Test func pinIDsListsEveryPin() throws {
        var hub = MapHub(settings: PinSettings())
        var out: [PinDelivery] = []
        let secrets = TestSecrets(seed: 8)
        for i in 0..<20 {
            _ = hub.create(PinDraft(point: .init(lat: 1, lon: Double(i)), title: "p", description: "", category: "general", ttlSeconds: 60),
                           id: PinID(random: secrets.randomBytes(16)), editDigest: secrets.digest(ofToken: "t"), now: 0, out: &out)
        }
        #expect(Set(hub.pinIDs) == Set(hub.exportPins().map(\.id)) && hub.pinIDs.count == 20)
    }
}
