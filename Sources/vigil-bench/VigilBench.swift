import ArgumentParser
import Glibc
import VigilCore
import VigilGeo
import VigilLoad
import VigilLoop
import VigilServer
import VigilWire

/// `vigil-bench`: micro-benchmarks of Vigil's core, in one process and without sockets.
///
/// They time the work the daemon's loop thread does per event: the hub's state change, finding the
/// recipients through the geohash channels with exact filtering, encoding the event once into a
/// frame, and queueing that frame on every recipient's output queue. Socket writes are not
/// included (the queues are emptied without a syscall); `vigil-load` measures the whole daemon.
@main
struct VigilBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vigil-bench",
        abstract: "Micro-benchmarks of Vigil's core (no sockets).",
        subcommands: [OneCell.self, Country.self, Pan.self, State.self, StateDigestBench.self, Clusters.self, SnapshotStoreBench.self, E2EBench.self]
    )
}

struct BenchSecrets: Secrets {
    func randomBytes(_ count: Int) -> [UInt8] { SecureRandom.bytes(count: count) }
    func digest(ofToken token: String) -> TokenDigest { TokenDigest(bytes: Crypto.sha256(Array(token.utf8))) }
}

/// The daemon's fan-out step for a pin event (`V1Application.fanOut`, its `.pins` case), through the
/// same types and calls: the event is written into the event writer's arena right after the one
/// before (`V1Application.makeEventWriter`, `JSONWriter(arenaCapacity:)`), framed in place there
/// (`EventFrames`), and that byte range is queued on every recipient's output queue
/// (`OutputQueue.append(shared:from:to:)`, which makes a recipient's consecutive frames of one arena
/// one queue entry). The recipients take the plain frame (no permessage-deflate), and there is no
/// `Connection` or `ByteStream` in between: no socket, and a queue never waits for one (the
/// daemon's copy of a range for a reader that is behind does not arise).
struct FanOut {
    var queues: [OutputQueue]
    var writer = V1Application.makeEventWriter()
    let pool = ChunkPool()
    var deliveries = 0
    var bytes = 0

    init(subscribers: Int) { queues = Array(repeating: OutputQueue(), count: subscribers) }

    mutating func deliver(_ out: inout [PinDelivery]) {
        for d in out {
            ServerMessages.pinEvent(d.kind, d.pin, into: &writer)
            let plain = EventFrames(&writer).plain
            // The slice's fields as constants: read out of `plain` inside the loop, its chunk was
            // retained and released per recipient (the daemon's walk lends it without).
            let (chunk, start, end) = (plain.chunk, plain.start, plain.end)
            for r in d.recipients { queues[Int(r)].append(shared: chunk, from: start, to: end) }
            deliveries += d.recipients.count
            bytes += d.recipients.count * plain.count
        }
        out.removeAll(keepingCapacity: true)
    }

    /// What a flush would leave behind: empty queues (no syscall here).
    mutating func drain() {
        for i in queues.indices where !queues[i].isEmpty { queues[i].removeAll(pool: pool) }
    }
}

func seconds(_ body: () -> Void) -> Double {
    let start = monotonicMilliseconds()
    body()
    return Double(monotonicMilliseconds() - start) / 1000
}

func oneDecimal(_ x: Double) -> String { "\((x * 10).rounded() / 10)" }

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

extension VigilBench {
    /// One publisher, N subscribers whose viewports share one cell: every update reaches all of them.
    struct OneCell: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "one-cell", abstract: "One publisher, N subscribers in one cell.")
        @Option(help: "Subscribers in the cell.") var subscribers = 10_000
        @Option(help: "Pin updates per run.") var events = 500
        @Option(help: "Runs; the median is reported.") var runs = 5
        @Option(name: .customLong("events-per-turn"), help: "Updates between two drains of the queues (the daemon's turn: a subscriber's frames of one turn are one queue entry).")
        var eventsPerTurn = 1
        @Option(name: .customLong("range-m"), help: "Give the pin this range_m, and every subscriber a viewer position inside the cell (the reach test on every candidate).")
        var rangeM: Int?

        func run() {
            let secrets = BenchSecrets()
            var hub = MapHub(settings: PinSettings())
            for s in 0..<subscribers {
                let viewer = rangeM.map { _ in GeoPoint(lat: 52.500 + Double(s % 100) * 0.0001, lon: 13.400 + Double(s / 100 % 100) * 0.0001) }
                _ = hub.subscribe(Int32(s), area: .box(GeoBox(south: 52.50, west: 13.40, north: 52.51, east: 13.41)), categories: nil,
                                  viewer: viewer)
            }
            var fan = FanOut(subscribers: subscribers)
            var out: [PinDelivery] = []
            let token = secrets.newToken()
            let digest = secrets.digest(ofToken: token)
            let pin = try! hub.create(PinDraft(point: GeoPoint(lat: 52.505, lon: 13.405), title: "Fox", description: "seen near the gate", category: "sighting", ttlSeconds: 3600,
                                               rangeMeters: rangeM),
                                      id: PinID(random: secrets.randomBytes(16)), editDigest: digest, now: 0, out: &out).get()
            fan.deliver(&out)
            fan.drain()
            let turn = max(1, eventsPerTurn)
            var rates: [Double] = []
            for run in 0..<runs {
                fan.deliveries = 0
                let t = seconds {
                    for i in 0..<events {
                        let lat = 52.5005 + Double((i + run) % 90) * 0.0001
                        _ = hub.update(pin.id, digest: digest, changes: PinChanges(lat: lat), now: Int64(i), out: &out)
                        fan.deliver(&out)
                        if (i + 1) % turn == 0 { fan.drain() }
                    }
                    if events % turn != 0 { fan.drain() }
                }
                rates.append(Double(fan.deliveries) / t)
            }
            print("one-cell: \(subscribers) subscribers, \(events) updates per run, \(runs) runs" + (rangeM.map { ", pin range \($0) m, viewers in the cell" } ?? "")
                  + (turn > 1 ? ", \(turn) updates a turn" : ""))
            print("  deliveries/s (median): \(Int(median(rates)))   runs: \(rates.map { Int($0) })")
        }
    }

    /// Many pins over a country, many city-sized viewports, a publisher moving pins about.
    struct Country: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "country", abstract: "Pins over a country, city-sized viewports.")
        @Option(help: "Pins spread over the country.") var pins = 100_000
        @Option(help: "City-sized viewports (about 20 km across).") var viewports = 1_000
        @Option(help: "Pin moves per run.") var events = 20_000
        @Option(help: "Runs; the median is reported.") var runs = 5
        @Option(help: "Random seed.") var seed: UInt64 = 1

        func run() {
            // Germany's bounding box, roughly.
            let (south, west, north, east) = (47.3, 5.9, 55.0, 15.0)
            let secrets = BenchSecrets()
            var rng = SplitMix64(state: seed)
            var hub = MapHub(settings: PinSettings())
            var out: [PinDelivery] = []
            var ids: [PinID] = []
            let digest = secrets.digest(ofToken: "bench")
            let tFill = seconds {
                for i in 0..<pins {
                    let p = GeoPoint(lat: rng.double(south, north), lon: rng.double(west, east))
                    let id = PinID(high: rng.next(), low: UInt64(i))
                    _ = hub.create(PinDraft(point: p, title: "pin \(i)", description: "", category: "general", ttlSeconds: 3600),
                                   id: id, editDigest: digest, now: 0, out: &out)
                    ids.append(id)
                }
            }
            out.removeAll()
            var replyPins = 0
            let tSubscribe = seconds {
                for v in 0..<viewports {
                    let lat = rng.double(south, north - 0.2), lon = rng.double(west, east - 0.3)
                    replyPins += hub.subscribe(Int32(v), area: .box(GeoBox(south: lat, west: lon, north: lat + 0.18, east: lon + 0.28)), categories: nil).pins.count
                }
            }
            var fan = FanOut(subscribers: viewports)
            var rates: [Double] = []
            var eventRates: [Double] = []
            for _ in 0..<runs {
                fan.deliveries = 0
                let t = seconds {
                    for _ in 0..<events {
                        let id = ids[Int(rng.next() % UInt64(ids.count))]
                        let p = GeoPoint(lat: rng.double(south, north), lon: rng.double(west, east))
                        _ = hub.update(id, digest: digest, changes: PinChanges(lat: p.lat, lon: p.lon), now: 1, out: &out)
                        fan.deliver(&out)
                    }
                    fan.drain()
                }
                rates.append(Double(fan.deliveries) / t)
                eventRates.append(Double(events) / t)
            }
            print("country: \(pins) pins, \(viewports) viewports of ~20 km, \(events) moves per run, \(runs) runs")
            print("  fill: \(Int(tFill * 1000)) ms; \(viewports) subscribes: \(Int(tSubscribe * 1000)) ms (\(replyPins / viewports) pins per reply on average)")
            print("  moves/s (median): \(Int(median(eventRates)))   deliveries/s (median): \(Int(median(rates)))   (\(fan.deliveries) deliveries in the last run)")
        }
    }
}

extension VigilBench {
    /// A city whose maps pan: each re-subscribe is the hub's `subscribe` (leave the old cells, join
    /// the new ones, query the pins inside) plus encoding the reply the way the server does
    /// (`ServerMessages.reply` into a reused writer). The pins and subscribers are placed from a
    /// seed, so the work is the same on every run and build: under callgrind the instruction
    /// count of `panLoop` per re-subscribe is a figure the machine's noise does not move.
    struct Pan: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "pan", abstract: "Re-subscribes of panning maps in one city.")
        @Option(help: "Pins spread over the city.") var pins = 6_000
        @Option(help: "Subscribers, each with a viewport in the city.") var subscribers = 5_000
        @Option(name: .customLong("viewport-km"), help: "Viewport width and height in km.") var viewportKm: Double = 7
        @Option(help: "Re-subscribes per run (round robin over the subscribers, each a ~1 km pan).") var pans = 5_000
        @Option(help: "Runs; the median is reported.") var runs = 5
        @Option(help: "Random seed.") var seed: UInt64 = 1

        // Berlin, roughly (33 km by 41 km).
        static let city = (south: 52.35, west: 13.10, north: 52.65, east: 13.70)

        func viewport(around c: GeoPoint) -> GeoArea {
            let dLat = viewportKm / 111.32 / 2, dLon = viewportKm / (111.32 * cos(c.lat * .pi / 180)) / 2
            return .box(GeoBox(south: c.lat - dLat, west: c.lon - dLon, north: c.lat + dLat, east: c.lon + dLon))
        }

        func run() {
            let city = Self.city
            var rng = SplitMix64(state: seed)
            var hub = MapHub(settings: PinSettings())
            var out: [PinDelivery] = []
            let digest = BenchSecrets().digest(ofToken: "bench")
            for i in 0..<pins {
                let p = GeoPoint(lat: rng.double(city.south, city.north), lon: rng.double(city.west, city.east))
                _ = hub.create(PinDraft(point: p, title: "pin \(i)", description: "seen near the corner of two streets", category: "general", ttlSeconds: 3600),
                               id: PinID(high: rng.next(), low: UInt64(i)), editDigest: digest, now: Int64(i), out: &out)
            }
            var centers: [GeoPoint] = []
            for s in 0..<subscribers {
                let c = GeoPoint(lat: rng.double(city.south + 0.03, city.north - 0.03), lon: rng.double(city.west + 0.05, city.east - 0.05))
                centers.append(c)
                _ = hub.subscribe(Int32(s), area: viewport(around: c), categories: nil)
            }
            var writer = JSONWriter(capacity: 4096)
            var times: [Double] = []
            var replied = 0, bytes = 0
            for _ in 0..<runs {
                replied = 0
                bytes = 0
                let t = seconds {
                    panLoop(&hub, &centers, &rng, &writer, replied: &replied, bytes: &bytes)
                }
                times.append(t)
            }
            let perPan = pans > 0 ? median(times) / Double(pans) * 1e6 : 0
            print("pan: \(pins) pins, \(subscribers) subscribers with \(viewportKm) km viewports, \(pans) re-subscribes per run, \(runs) runs")
            print("  pins per reply (mean): \(pans > 0 ? replied / pans : 0)   reply bytes (mean): \(pans > 0 ? bytes / pans : 0)")
            print("  µs per re-subscribe (median): \(oneDecimal(perPan))   runs: \(times.map { oneDecimal($0 / Double(max(1, pans)) * 1e6) })")
        }

        /// The measured part (kept out of line so callgrind can count it alone:
        /// `--toggle-collect='*panLoop*'`).
        @inline(never)
        func panLoop(_ hub: inout MapHub, _ centers: inout [GeoPoint], _ rng: inout SplitMix64, _ writer: inout JSONWriter,
                     replied: inout Int, bytes: inout Int) {
            let city = Self.city
            for i in 0..<pans {
                let s = i % max(1, subscribers)
                let c = centers[s]
                let moved = GeoPoint(lat: min(city.north - 0.03, max(city.south + 0.03, c.lat + rng.double(-0.009, 0.009))),
                                     lon: min(city.east - 0.05, max(city.west + 0.05, c.lon + rng.double(-0.014, 0.014))))
                centers[s] = moved
                let result = hub.subscribe(Int32(s), area: viewport(around: moved), categories: nil)
                writer.reset()
                ServerMessages.reply(.subscribed(pins: result.pins, truncated: result.truncated), ref: .number(Double(i)),
                                     maxBytes: 1 << 20, into: &writer)
                replied += result.pins.count
                bytes += writer.count
            }
        }
    }
}
