import Glibc
import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Builders for the values the tests store and compare.
enum Fixtures {
    static let titles = ["Road closed", "Straßensperre", "道路封鎖", "Éboulement ⚠️", "", "🚧🚧🚧", "tab\tnew\nline \"quoted\""]

    static func pin(_ secrets: TestSecrets, sequence: UInt64, votes: Int = 0, now: Int64 = 1_700_000_000_000) -> Pin {
        var pin = Pin(id: PinID(random: secrets.randomBytes(16)),
                      point: GeoPoint(lat: secrets.unit() * 180 - 90, lon: secrets.unit() * 360 - 180),
                      title: titles[secrets.roll(titles.count)], description: secrets.roll(3) == 0 ? "" : "description \(sequence) ✓",
                      category: ["general", "hazard", "help"][secrets.roll(3)], createdAt: now - Int64(secrets.roll(100_000)),
                      expiresAt: now + 1_000 + Int64(secrets.roll(3_600_000)), editDigest: secrets.digest(ofToken: "edit-\(sequence)"))
        pin.updatedAt = pin.createdAt + Int64(secrets.roll(1000))
        pin.sequence = sequence
        for _ in 0..<votes {
            let value: Int8 = secrets.roll(2) == 0 ? 1 : -1
            if pin.votes.updateValue(value, forKey: secrets.next() % 1_000_000) == nil {
                if value == 1 { pin.up += 1 } else { pin.down += 1 }
            }
        }
        return pin
    }

    static func location(_ secrets: TestSecrets) -> PanicLocation {
        PanicLocation(lat: secrets.unit() * 180 - 90, lon: secrets.unit() * 360 - 180,
                      accuracyM: secrets.roll(2) == 0 ? nil : secrets.unit() * 100,
                      heading: secrets.roll(2) == 0 ? nil : secrets.unit() * 360,
                      speedMps: secrets.roll(3) == 0 ? nil : secrets.unit() * 30)
    }

    /// A stream driven through `events` more events after its start (locations and status
    /// changes), ended when `end` is given.
    static func stream(_ secrets: TestSecrets, events: Int, capacity: Int, end: PanicEndReason? = nil,
                       tokens: Int = 2, note: String? = "walking home 🌙", start: Int64 = 1_700_000_000_000) -> PanicStream {
        var stream = try! PanicStartRecord(id: StreamID(random: secrets.randomBytes(16)), status: .red, location: location(secrets),
                                           note: note, startedAt: start, ownerDigest: secrets.digest(ofToken: "owner-\(secrets.next())"),
                                           watchTokens: (0..<tokens).map { _ in secrets.digest(ofToken: "watch-\(secrets.next())") },
                                           historyCapacity: capacity).stream()
        var now = start
        for _ in 0..<events {
            now += 1 + Int64(secrets.roll(5000))
            let kind: PanicEventKind = secrets.roll(4) == 0 ? .status(stream.status == .red ? .amber : .red) : .location(location(secrets))
            _ = stream.record(kind, now: now)
        }
        if let end { _ = stream.record(.ended(end), now: now + 1) }
        return stream
    }

    /// An amber stream with a safety timer (moved once), and, when `escalated`, its missed
    /// check-in recorded as the hub's tick does (noticed 40 ms after the deadline).
    static func timedStream(_ secrets: TestSecrets, escalated: Bool, start: Int64 = 1_700_000_000_000) -> PanicStream {
        var stream = try! PanicStartRecord(id: StreamID(random: secrets.randomBytes(16)), status: .amber, location: location(secrets),
                                           note: "walk me home", startedAt: start, ownerDigest: secrets.digest(ofToken: "owner-\(secrets.next())"),
                                           watchTokens: [secrets.digest(ofToken: "watch-\(secrets.next())")],
                                           historyCapacity: 8, dueAt: start + 600_000).stream()
        _ = stream.record(.location(location(secrets)), now: start + 1_000)
        _ = stream.record(.timer(dueAt: start + 900_000), now: start + 2_000)
        if escalated { _ = stream.record(.missedCheckIn(dueAt: start + 900_000, last: stream.last, sentAt: start + 900_040), now: start + 900_000) }
        return stream
    }
}

/// Pins equal as values (`==` ignores `sequence` and `cell`) and in creation order and cell.
func expectSamePins(_ a: [Pin], _ b: [Pin], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(a == b, sourceLocation: sourceLocation)
    #expect(a.map(\.sequence) == b.map(\.sequence), sourceLocation: sourceLocation)
    #expect(a.map(\.cell) == b.map(\.cell), sourceLocation: sourceLocation)
}

/// Streams equal in everything a snapshot keeps. `staleNotified` of an ended stream can differ
/// between a live hub and a restored one (stale notices are not journaled, and nothing reads the
/// flag once a stream has ended), so it is compared for active streams only unless asked.
func expectSameStream(_ a: PanicStream, _ b: PanicStream, compareEndedStale: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(a.id == b.id, sourceLocation: sourceLocation)
    #expect(a.status == b.status, sourceLocation: sourceLocation)
    #expect(a.startedAt == b.startedAt, sourceLocation: sourceLocation)
    #expect(a.updatedAt == b.updatedAt, sourceLocation: sourceLocation)
    #expect(a.seq == b.seq, sourceLocation: sourceLocation)
    #expect(a.last == b.last, sourceLocation: sourceLocation)
    #expect(a.note == b.note, sourceLocation: sourceLocation)
    #expect(a.ended == b.ended, sourceLocation: sourceLocation)
    #expect(a.history.capacity == b.history.capacity, sourceLocation: sourceLocation)
    #expect(a.history.all == b.history.all, sourceLocation: sourceLocation)
    #expect(a.ownerTokenDigest == b.ownerTokenDigest, sourceLocation: sourceLocation)
    #expect(a.watchTokenDigests == b.watchTokenDigests, sourceLocation: sourceLocation)
    #expect(a.dueAt == b.dueAt, sourceLocation: sourceLocation)
    #expect(a.missedCheckInAt == b.missedCheckInAt, sourceLocation: sourceLocation)
    #expect(a.missedCheckInSentAt == b.missedCheckInSentAt, sourceLocation: sourceLocation)
    #expect(a.circle == b.circle, sourceLocation: sourceLocation)
    if compareEndedStale || a.isActive {
        #expect(a.isStaleNotified == b.isStaleNotified, sourceLocation: sourceLocation)
    }
}

func expectSameStreams(_ a: [PanicStream], _ b: [PanicStream], compareEndedStale: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(a.map(\.id) == b.map(\.id), sourceLocation: sourceLocation)
    guard a.count == b.count else { return }
    for (x, y) in zip(a, b) { expectSameStream(x, y, compareEndedStale: compareEndedStale, sourceLocation: sourceLocation) }
}

/// A fresh directory under /tmp, removed with everything in it when the value goes.
final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/vigil-state-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: errno \(errno)")
        path = String(cString: made!)
    }

    deinit { Self.removeTree(path) }

    func file(_ name: String) -> String { path + "/" + name }

    static func removeTree(_ path: String) {
        if let isDirectory = try? StateFiles.isDirectory(path), isDirectory == true {
            chmod(path, 0o700)
            for name in (try? StateFiles.list(path)) ?? [] { removeTree(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    func write(_ name: String, _ bytes: [UInt8]) {
        let fd = open(file(name), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        precondition(fd >= 0)
        bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    func read(_ name: String) -> [UInt8] {
        (try? StateFiles.readAll(file(name))) ?? []
    }

    func names() -> [String] {
        ((try? StateFiles.list(path)) ?? []).sorted()
    }
}

/// File mode bits (permissions) of `path`.
func fileMode(_ path: String) -> mode_t {
    var info = stat()
    precondition(stat(path, &info) == 0)
    return info.st_mode & 0o7777
}
