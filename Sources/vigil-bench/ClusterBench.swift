import ArgumentParser
import Glibc
import VigilCore
import VigilGeo
import VigilLoad

extension VigilBench {
    /// The cost of a pin change with many cluster subscribers across a country (issue 15): pins
    /// moved about Germany while 10,000 subscribers watch counts, half of them the whole country,
    /// half a region (~170 by 170 km). Times, without sockets:
    /// - a move, with the marking of changed cells on the subscribers that count them, either
    ///   one change per loop turn (the worst case: every change walks its channels) or `--batch`
    ///   changes per turn (a busy loop: a cell's channel is walked once per turn);
    /// - the flush: the `clusters.changed` due after an interval, built and encoded;
    /// - the same moves with no cluster subscriber (the counts alone), for the ratio;
    /// - the restore-time recount of every pin at the cluster precisions.
    struct Clusters: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clusters", abstract: "Pin changes with many cluster subscribers.")
        @Option(help: "Pins spread over the country.") var pins = 100_000
        @Option(help: "Cluster subscribers (half country-wide, half regional).") var subscribers = 10_000
        @Option(help: "Pin moves per run.") var moves = 20_000
        @Option(help: "Moves per loop turn in the batched measurement.") var batch = 100
        @Option(help: "Runs; the median is reported.") var runs = 3
        @Option(help: "Random seed.") var seed: UInt64 = 1

        // Germany's bounding box, roughly.
        static let country = (south: 47.3, west: 5.9, north: 55.0, east: 15.0)

        func run() {
            let c = Self.country
            var rng = SplitMix64(state: seed)
            let settings = PinSettings()
            // Filled with counts at one precision only, so that the memory the counts at every
            // precision take is measured first, from pages no earlier counts freed.
            var one = settings
            (one.clusterPrecisionMin, one.clusterPrecisionMax) = (4, 4)
            var hub = MapHub(settings: one)
            var out: [PinDelivery] = []
            var ids: [PinID] = []
            let digest = BenchSecrets().digest(ofToken: "bench")
            let categories = settings.categories
            for i in 0..<pins {
                let p = GeoPoint(lat: rng.double(c.south, c.north), lon: rng.double(c.west, c.east))
                let id = PinID(high: rng.next(), low: UInt64(i))
                _ = hub.create(PinDraft(point: p, title: "pin \(i)", description: "", category: categories[i % categories.count], ttlSeconds: 3600),
                               id: id, editDigest: digest, now: 0, out: &out)
                ids.append(id)
            }
            out.removeAll()
            var filled = hub.store
            hub = MapHub(settings: settings)
            let rssBefore = residentBytes()
            filled.countClusters(precisions: settings.clusterPrecisionMin...settings.clusterPrecisionMax)
            let countsBytes = residentBytes() - rssBefore
            hub = MapHub(settings: settings, store: filled)
            filled = PinStore()
            // Without subscribers first: the cost of keeping the counts alone.
            var bare: [Double] = []
            for _ in 0..<runs {
                bare.append(cpuSeconds { moveLoop(&hub, ids, &rng, digest, &out, perTurn: 1, now: 0) } / Double(moves) * 1e6)
            }
            var precisions: [Int: Int] = [:]
            let tSubscribe = cpuSeconds {
                for s in 0..<subscribers {
                    let area: GeoArea
                    if s % 2 == 0 {
                        let j = rng.double(-0.5, 0.5)
                        area = .box(GeoBox(south: c.south + j, west: c.west + j, north: c.north + j, east: c.east + j))
                    } else {
                        let lat = rng.double(c.south, c.north - 1.5), lon = rng.double(c.west, c.east - 2.5)
                        area = .box(GeoBox(south: lat, west: lon, north: lat + 1.5, east: lon + 2.5))
                    }
                    precisions[hub.subscribeClusters(Int32(s), area: area, categories: nil, now: 0).precision, default: 0] += 1
                }
            }
            var single: [Double] = [], batched: [Double] = [], flushes: [Double] = []
            var messages = 0, cells = 0, bytes = 0
            var now: Int64 = 0
            var writer = JSONWriter(capacity: 1 << 16)
            for _ in 0..<runs {
                single.append(cpuSeconds { moveLoop(&hub, ids, &rng, digest, &out, perTurn: 1, now: now) } / Double(moves) * 1e6)
                batched.append(cpuSeconds { moveLoop(&hub, ids, &rng, digest, &out, perTurn: batch, now: now) } / Double(moves) * 1e6)
                now += Int64(settings.clusterIntervalMs)
                messages = 0; cells = 0; bytes = 0
                flushes.append(cpuSeconds {
                    var (due, encoding) = hub.takeDueClusters(now: now)
                    for update in due {
                        writer.reset()
                        _ = hub.clustersChangedJSON(update, encoding: &encoding, maxBytes: 1 << 20, into: &writer)
                        messages += 1
                        cells += update.cells.count
                        bytes += writer.count
                    }
                } * 1000)
            }
            // Restore: a store counted afresh at the configured precisions, and at one precision.
            var store = hub.store
            hub = MapHub(settings: settings)
            var recount: [Double] = [], recountOne: [Double] = []
            let range = settings.clusterPrecisionMin...settings.clusterPrecisionMax
            for _ in 0..<runs {
                store.countClusters(precisions: 4...4)
                recount.append(cpuSeconds { store.countClusters(precisions: range) } * 1000)
                recountOne.append(cpuSeconds { store.countClusters(precisions: 4...4) } * 1000)
            }
            store.countClusters(precisions: range)
            let occupied = range.map { "p\($0): \(store.clusters.cellCount(precision: $0))" }.joined(separator: ", ")
            print("clusters (CPU time of the thread): \(pins) pins over Germany, \(subscribers) cluster subscribers (half country-wide, half ~170 km regions), \(moves) moves per run, \(runs) runs")
            print("  subscribes: \(Int(tSubscribe * 1000)) ms; precisions used: \(precisions.sorted { $0.key < $1.key }.map { "p\($0.key) × \($0.value)" }.joined(separator: ", "))")
            print("  µs per move, no cluster subscriber (counts kept at \(range.count) precisions): \(oneDecimal(median(bare)))   runs: \(bare.map(oneDecimal))")
            print("  µs per move, one change per turn: \(oneDecimal(median(single)))   runs: \(single.map(oneDecimal))   ratio to none: \(oneDecimal(median(single) / median(bare)))")
            print("  µs per move, \(batch) changes per turn: \(oneDecimal(median(batched)))   runs: \(batched.map(oneDecimal))   ratio to none: \(oneDecimal(median(batched) / median(bare)))")
            print("  flush after \(2 * moves) moves: \(oneDecimal(median(flushes))) ms (median)   runs: \(flushes.map(oneDecimal)); last: \(messages) messages, \(cells) cells, \(bytes / max(1, messages)) bytes per message")
            print("  restore recount of \(pins) pins: \(oneDecimal(median(recount))) ms at \(range.count) precisions, \(oneDecimal(median(recountOne))) ms at one   occupied cells: \(occupied)")
            print("  resident memory the counts at \(range.count) precisions added to a store counting one: \(countsBytes / 1024) KiB (\(countsBytes / max(1, pins)) bytes per pin)")
        }

        /// Resident bytes of this process (`VmRSS` of /proc/self/status).
        func residentBytes() -> Int {
            guard let f = fopen("/proc/self/status", "r") else { return 0 }
            defer { fclose(f) }
            var bytes = [UInt8](repeating: 0, count: 8192)
            let n = fread(&bytes, 1, bytes.count, f)
            guard let status = ProcParse.status(String(decoding: bytes[..<n], as: UTF8.self)) else { return 0 }
            return Int(status.rssKiB) * 1024
        }

        /// CPU time of this thread: the machine is shared, and wall time counts the other tenants.
        func cpuSeconds(_ body: () -> Void) -> Double {
            var a = timespec(), b = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a)
            body()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b)
            return Double(b.tv_sec - a.tv_sec) + Double(b.tv_nsec - a.tv_nsec) / 1e9
        }

        /// Moves random pins to random places; every `perTurn` moves, the end-of-turn marking
        /// (`markClusterChanges`, the first half of `takeClusterUpdates`: nothing is built).
        @inline(never)
        func moveLoop(_ hub: inout MapHub, _ ids: [PinID], _ rng: inout SplitMix64, _ digest: TokenDigest, _ out: inout [PinDelivery],
                      perTurn: Int, now: Int64) {
            let c = Self.country
            for i in 0..<moves {
                let id = ids[Int(rng.next() % UInt64(ids.count))]
                let p = GeoPoint(lat: rng.double(c.south, c.north), lon: rng.double(c.west, c.east))
                _ = hub.update(id, digest: digest, changes: PinChanges(lat: p.lat, lon: p.lon), now: 1, out: &out)
                out.removeAll(keepingCapacity: true)
                if (i + 1) % perTurn == 0 { hub.markClusterChanges(now: now) }
            }
        }
    }
}
