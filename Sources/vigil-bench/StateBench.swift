import ArgumentParser
import Glibc
import VigilCore
import VigilGeo
import VigilLoad
import VigilLoop
import VigilState

extension VigilBench {
    /// Snapshot size and time, and restore time, for a big state, without sockets; optionally
    /// leaves the state directory behind for a daemon to start from (benchmarks/state_bench.py).
    struct State: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "state", abstract: "Snapshot encode/write and restore times for N pins and K panic streams.")
        @Option(help: "Live pins (votes on every tenth).") var pins = 1_000_000
        @Option(help: "Panic streams, each with --events location updates in its history.") var streams = 10_000
        @Option(help: "Location events per stream.") var events = 100
        @Option(help: "State directory to write (created; must be empty or absent).") var dir: String
        @Option(help: "Runs of encode and restore; the median is reported.") var runs = 3
        @Option(help: "Random seed.") var seed: UInt64 = 1

        func run() throws {
            let now = Int64(time(nil)) * 1000
            var hub = MapHub(settings: PinSettings())
            var panic = PanicHub(settings: PanicSettings())
            let tFill = seconds { benchState(pins: pins, streams: streams, events: events, seed: seed, now: now, map: &hub, panic: &panic) }
            var encodeTimes: [Double] = []
            var bytes: [UInt8] = []
            for _ in 0..<runs {
                encodeTimes.append(seconds {
                    bytes = SnapshotCodec.encode(StateSnapshot(takenAt: now, journalSegment: 1, map: hub, panic: panic))
                })
            }
            let directory = try StateDirectory(path: dir)
            let tWrite = try secondsThrowing { try directory.writeSnapshot(bytes, segment: 1) }
            var restoreTimes: [Double] = []
            var restoredPins = 0, restoredStreams = 0
            for _ in 0..<runs {
                restoreTimes.append(try secondsThrowing {
                    let state = try directory.recover(pinSettings: PinSettings(), panicSettings: PanicSettings(), now: now)
                    restoredPins = state.map.store.count
                    restoredStreams = state.panic.count
                })
            }
            guard restoredPins == hub.store.count, restoredStreams == panic.count else {
                throw ValidationError("restore gave \(restoredPins) pins and \(restoredStreams) streams, expected \(hub.store.count) and \(panic.count)")
            }
            print("state: \(pins) pins (every tenth voted), \(streams) panic streams x \(events) events, \(runs) runs")
            print("  fill: \(Int(tFill * 1000)) ms")
            print("  snapshot: \(bytes.count / 1_048_576) MiB (\(bytes.count) bytes); encode \(Int(median(encodeTimes) * 1000)) ms (median); write+fsync+rename \(Int(tWrite * 1000)) ms")
            print("  restore (read, verify, decode, rebuild indexes): \(Int(median(restoreTimes) * 1000)) ms (median); \(restoredPins) pins, \(restoredStreams) streams")
        }
    }
}

func secondsThrowing(_ body: () throws -> Void) throws -> Double {
    let start = monotonicMilliseconds()
    try body()
    return Double(monotonicMilliseconds() - start) / 1000
}

/// The bench's state: `pins` pins (every tenth with a vote) in Germany's box, `streams` red panic
/// streams of `events` location events each, all made at `now`.
func benchState(pins: Int, streams: Int, events: Int, seed: UInt64, now: Int64, map hub: inout MapHub, panic: inout PanicHub) {
    let secrets = BenchSecrets()
    var rng = SplitMix64(state: seed)
    var out: [PinDelivery] = []
    var panicOut: [PanicDelivery] = []
    let digest = secrets.digest(ofToken: "bench")
    for i in 0..<pins {
        let p = GeoPoint(lat: rng.double(47.3, 55.0), lon: rng.double(5.9, 15.0))
        let id = PinID(high: rng.next(), low: UInt64(i))
        _ = hub.create(PinDraft(point: p, title: "pin \(i)", description: "a sighting near the station", category: "general",
                                ttlSeconds: 86_400), id: id, editDigest: digest, now: now, out: &out)
        if i % 10 == 0 { _ = hub.vote(id, voter: UInt64(i), value: 1, out: &out) }
        out.removeAll(keepingCapacity: true)
    }
    for s in 0..<streams {
        let location = PanicLocation(lat: rng.double(47.3, 55.0), lon: rng.double(5.9, 15.0), accuracyM: 8)
        guard case .success(let started) = panic.start(owner: Int32(s), status: .red, location: location, note: nil, watchers: 3,
                                                       secrets: secrets, now: now, out: &panicOut) else { continue }
        for k in 1..<events {
            _ = panic.update(started.stream.id, by: Int32(s), ownerToken: nil,
                             location: PanicLocation(lat: location.lat + Double(k) / 1e4, lon: location.lon, accuracyM: 8),
                             secrets: secrets, now: now + Int64(k) * 1000, out: &panicOut)
        }
        panicOut.removeAll(keepingCapacity: true)
    }
}
