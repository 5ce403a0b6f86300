import XCTest
import VigilCore
import VigilGeo
@testable import VigilLoad

/// The scanner is checked against the server's own encoder (VigilCore's `ServerMessages`), so a
/// change of the wire format breaks these tests rather than the load client in the field.
final class PinEventScanTests: XCTestCase {
    private let id = PinID(high: 0x9B2F_0C1E_4A7D_4F43, low: 0x9A51_0D6F_7C3E_8B12)

    private func pin(id: PinID? = nil, description: String, up: Int = 0, down: Int = 0,
                     title: String = "Fox in the park") -> Pin {
        var p = Pin(id: id ?? self.id, point: GeoPoint(lat: 52.52, lon: 13.405), title: title,
                    description: description, category: "sighting", createdAt: 1_795_000_000_000,
                    expiresAt: 1_795_014_400_000, editDigest: TokenDigest(bytes: [UInt8](repeating: 7, count: 32)))
        p.up = up
        p.down = down
        return p
    }

    private func encode(_ kind: PinEventKind, _ p: Pin) -> [UInt8] {
        var w = JSONWriter()
        ServerMessages.pinEvent(kind, p, into: &w)
        return w.bytes
    }

    func testEveryEventKindIsRecognised() {
        let kinds: [PinEventKind] = [.added, .updated, .removed(.moved), .removed(.deleted), .removed(.flagged), .expired]
        for kind in kinds {
            let scanned = PinEventScan.event(encode(kind, pin(description: "m2 v1 t500", up: 1)))
            XCTAssertEqual(scanned?.kind, kind)
            XCTAssertEqual(scanned?.pin.id, id)
            XCTAssertEqual(scanned?.pin.stamp, PayloadStamp(moves: 2, votes: 1, sendNs: 500))
            XCTAssertEqual(scanned?.pin.up, 1)
            XCTAssertEqual(scanned?.pin.down, 0)
            XCTAssertEqual(scanned?.pin.observedVersion, 3)
        }
    }

    func testRawBufferEntryPointMatches() {
        let bytes = encode(.updated, pin(description: "m1 v0 t9"))
        let scanned = bytes.withUnsafeBytes { PinEventScan.event($0) }
        XCTAssertEqual(scanned, PinEventScan.event(bytes))
    }

    func testOtherMessagesAreNotPinEvents() {
        XCTAssertNil(PinEventScan.event(Array(#"{"type":"ok","ref":1,"pins":[]}"#.utf8)))
        XCTAssertNil(PinEventScan.event(Array(#"{"type":"panic.location","stream":"x","seq":4}"#.utf8)))
        XCTAssertNil(PinEventScan.event(Array(#"{"type":"pin.renamed","pin":{"id":"x"}}"#.utf8)))
        XCTAssertNil(PinEventScan.event(Array(#"{"type":"pin.removed","pin":{"id":"x"},"reason":"eaten"}"#.utf8)))
        XCTAssertNil(PinEventScan.event([UInt8]()))
    }

    func testLatencyComesFromTheStampOnlyWhenTheEventIsTheStampsOp() {
        let move = PinEventScan.event(encode(.updated, pin(description: "m3 v2 t1000", up: 2)))
        XCTAssertEqual(move?.latencySendNs, 1000)
        let added = PinEventScan.event(encode(.added, pin(description: "m0 v0 t77")))
        XCTAssertEqual(added?.latencySendNs, 77)
        let movedOut = PinEventScan.event(encode(.removed(.moved), pin(description: "m4 v0 t88")))
        XCTAssertEqual(movedOut?.latencySendNs, 88)
        // A vote: up + down is past the stamp's v, so the stamp's time is an older op's.
        let vote = PinEventScan.event(encode(.updated, pin(description: "m3 v2 t1000", up: 3)))
        XCTAssertNil(vote?.latencySendNs)
        XCTAssertEqual(vote?.pin.observedVersion, 6)
        let deleted = PinEventScan.event(encode(.removed(.deleted), pin(description: "m3 v2 t1000", up: 2)))
        XCTAssertNil(deleted?.latencySendNs)
        let foreign = PinEventScan.event(encode(.updated, pin(description: "someone else's pin")))
        XCTAssertNil(foreign?.latencySendNs)
        XCTAssertNil(foreign?.pin.observedVersion)
        XCTAssertEqual(foreign?.pin.id, id)
    }

    func testHostileTitlesDoNotConfuseTheScan() {
        let title = #"{"id":"00000000-0000-4000-8000-000000000000","description":"m9 v9 t9","up":99,"down":99 \ "#
        let scanned = PinEventScan.event(encode(.updated, pin(description: "m1 v0 t5", title: title)))
        XCTAssertEqual(scanned?.pin.id, id)
        XCTAssertEqual(scanned?.pin.stamp, PayloadStamp(moves: 1, votes: 0, sendNs: 5))
        XCTAssertEqual(scanned?.pin.up, 0)
        XCTAssertEqual(scanned?.pin.down, 0)
    }

    func testSubscribeReplyPinsAreScannedInOrder() {
        let second = PinID(high: 1, low: 2)
        var w = JSONWriter()
        ServerMessages.ok(ref: .number(1), into: &w) { w in
            w.key("pins")
            w.beginArray()
            ServerMessages.pin(pin(description: "m2 v1 t10", up: 1), into: &w)
            ServerMessages.pin(pin(id: second, description: "not ours", down: 4), into: &w)
            w.endArray()
            w.key("truncated"); w.bool(true)
        }
        let (pins, truncated) = PinEventScan.pins(w.bytes)
        XCTAssertTrue(truncated)
        XCTAssertEqual(pins.count, 2)
        XCTAssertEqual(pins[0], ScannedPin(id: id, stamp: PayloadStamp(moves: 2, votes: 1, sendNs: 10), up: 1, down: 0))
        XCTAssertEqual(pins[1].id, second)
        XCTAssertNil(pins[1].stamp, "the second pin must not borrow the first one's stamp")
        XCTAssertEqual(pins[1].down, 4)
        let snapshot = SubscriberLog.observedPins(pins)
        XCTAssertEqual(snapshot, [ObservedPin(pin: id, observedVersion: 3), ObservedPin(pin: second, observedVersion: -1)])
    }

    func testEmptyReplyAndNoTruncation() {
        let (pins, truncated) = PinEventScan.pins(Array(#"{"type":"ok","ref":1,"pins":[]}"#.utf8))
        XCTAssertTrue(pins.isEmpty)
        XCTAssertFalse(truncated)
    }

    func testNonUUIDIdsGiveNilIds() {
        let bytes = Array(#"{"type":"pin.added","pin":{"id":"not-a-uuid","description":"m0 v0 t1","up":0,"down":0}}"#.utf8)
        let scanned = PinEventScan.event(bytes)
        XCTAssertEqual(scanned?.kind, .added)
        XCTAssertNil(scanned?.pin.id)
        XCTAssertEqual(scanned?.pin.observedVersion, 0)
    }

    func testEveryPrefixOfAnEventIsSafe() {
        let bytes = encode(.removed(.moved), pin(description: "m2 v1 t500", up: 1))
        for end in 0...bytes.count {
            _ = PinEventScan.event(bytes[0..<end])
            _ = PinEventScan.pins(bytes[0..<end])
        }
        XCTAssertEqual(PinEventScan.event(bytes[0..<bytes.count])?.kind, .removed(.moved))
    }

    func testUppercaseUUIDsParse() {
        let text = "9B2F0C1E-4A7D-4F43-9A51-0D6F7C3E8B12"
        let parsed = Array(text.utf8).withUnsafeBufferPointer { RawScan.pinID(in: $0, at: 0) }
        XCTAssertEqual(parsed, id)
        XCTAssertEqual(parsed, PinID(text))
    }
}
