import ArgumentParser
import Glibc
import VigilReplication
import VigilLoad
import VigilLoop
import VigilNATS

extension VigilBench {
    /// Publishing and downloading a cluster snapshot through a JetStream object store
    /// (`SnapshotStore`, issue 16) against a running `nats-server -js` (the one benchmark here with
    /// sockets; `benchmarks/snapshot_store.sh` starts the server pinned to another CPU). For each
    /// size and run: the put's and the download's wall time, the loop's longest turn while each
    /// runs (in CPU time of the loop's thread, so that time the CPU spent on other processes does
    /// not count; waiting in epoll costs none), and the round trip of a small request echoed through the same client every 10 ms
    /// during the transfer (the other traffic a node's loop carries), against the same round trip
    /// idle. The download is checked byte for byte.
    struct SnapshotStoreBench: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "snapshot-store",
                                                        abstract: "Snapshot put/get through JetStream (needs a nats-server -js).")
        @Option(help: "The NATS server.") var nats = "nats://127.0.0.1:4222"
        @Option(parsing: .upToNextOption, help: "Snapshot sizes in MiB.") var mib: [Int] = [10, 100]
        @Option(help: "Runs per size; medians are reported.") var runs = 3
        @Option(help: "Chunk acknowledgements awaited at once (default: SnapshotStoreSettings').") var acks: Int?

        func run() throws {
            let loop = try EventLoop()
            let url = try NATSServerURL.parse(nats).get()
            let client = NATSClient(urls: [url], options: NATSConnectOptions(name: "vigil-bench"), loop: loop)
            try client.start()
            guard drive(loop, timeoutMs: 5_000, until: { client.state == .connected }) != nil else {
                throw ValidationError("no connection to \(nats)")
            }
            try client.subscribe(subject: "bench.echo") { message in
                if let reply = message.replyTo { try? client.publish(subject: reply, payload: message.payload) }
            }
            var settings = SnapshotStoreSettings(replicationName: "BENCH", maxSnapshotBytes: (mib.max() ?? 1) << 20)
            if let acks { settings.maxAcksOutstanding = acks }
            print("chunks of \(settings.chunkSize) bytes, \(settings.maxAcksOutstanding) acknowledgements awaited at once")
            let store = SnapshotStore(jetStream: JetStream(client: client, timeoutMs: 10_000), settings: settings)

            let idle = Echo(client: client)
            _ = drive(loop, timeoutMs: 2_000, echo: idle, until: { false })
            print("idle: echo round trip p50 \(fmt(idle.percentile(0.5))) ms, max \(fmt(idle.percentile(1))) ms (\(idle.ms.count) samples)")
            print("columns: put_ms put_MiB/s put_longest_turn_cpu_ms put_echo_p50_ms put_echo_max_ms get_ms get_MiB/s get_longest_turn_cpu_ms get_echo_p50_ms get_echo_max_ms")
            var sequence = UInt64(monotonicMilliseconds())  // above what an earlier invocation left in the bucket
            for size in mib {
                var rng = SplitMix64(state: UInt64(size))
                var bytes = [UInt8](repeating: 0, count: size << 20)
                bytes.withUnsafeMutableBytes { raw in
                    for i in stride(from: 0, to: raw.count, by: 8) { raw.storeBytes(of: rng.next(), toByteOffset: i, as: UInt64.self) }
                }
                var rows: [[Double]] = []
                for run in 1...runs {
                    let putEcho = Echo(client: client)
                    var published: Result<PublishedSnapshot, SnapshotStoreError>?
                    let putStart = monotonicMilliseconds()
                    sequence += 1  // never below the stored snapshot's: that put would be refused (superseded)
                    try store.put(bytes, metadata: SnapshotMetadata(replicatedSequence: sequence, nodeID: "bench", formatVersion: 1,
                                                                    takenAtMs: 0)) { published = $0 }
                    guard let putTurn = drive(loop, timeoutMs: 600_000, echo: putEcho, until: { published != nil }) else {
                        throw ValidationError("put did not finish")
                    }
                    let putMs = Double(monotonicMilliseconds() - putStart)
                    if case .failure(let error)? = published { throw ValidationError("put: \(error)") }

                    let getEcho = Echo(client: client)
                    var got: Result<SnapshotLookup, SnapshotStoreError>?
                    let getStart = monotonicMilliseconds()
                    try store.getNewest { got = $0 }
                    guard let getTurn = drive(loop, timeoutMs: 600_000, echo: getEcho, until: { got != nil }) else {
                        throw ValidationError("get did not finish")
                    }
                    let getMs = Double(monotonicMilliseconds() - getStart)
                    guard case .success(.snapshot(let snapshot))? = got, snapshot.bytes == bytes else {
                        throw ValidationError("get: \(String(describing: got).prefix(200))")
                    }
                    let row = [putMs, Double(size) / putMs * 1000, putTurn, putEcho.percentile(0.5), putEcho.percentile(1),
                               getMs, Double(size) / getMs * 1000, getTurn, getEcho.percentile(0.5), getEcho.percentile(1)]
                    print("run \(run): " + row.map(fmt).joined(separator: "  "))
                    rows.append(row)
                }
                let medians = (0..<rows[0].count).map { column in median(rows.map { $0[column] }) }
                print("\(size) MiB median: " + medians.map(fmt).joined(separator: "  "))
            }
            client.close()
        }

        /// Turns the loop until `condition` holds, sending `echo`'s requests meanwhile; the longest
        /// turn in ms, nil on timeout.
        private func drive(_ loop: EventLoop, timeoutMs: Int64, echo: Echo? = nil, until condition: () -> Bool) -> Double? {
            let deadline = monotonicMilliseconds() + timeoutMs
            var longestNs: UInt64 = 0
            while !condition() {
                if monotonicMilliseconds() >= deadline { return nil }
                // A request just queued goes out at the end of the next turn: that turn must not wait.
                if echo?.tick() == true { loop.requestTurn() }
                let before = nowNs(CLOCK_THREAD_CPUTIME_ID)
                try? loop.turn(timeoutMs: 1)
                longestNs = max(longestNs, nowNs(CLOCK_THREAD_CPUTIME_ID) - before)
            }
            return Double(longestNs) / 1e6
        }
    }

    /// A small request every 10 ms to a subject the same client answers: its round trip is how
    /// long other traffic waits behind the transfer (the client's output queue, the loop's turns).
    final class Echo {
        let client: NATSClient
        var nextAtMs: Int64 = 0
        var ms: [Double] = []

        init(client: NATSClient) { self.client = client }

        /// Sends the next request when it is due; whether it did.
        func tick() -> Bool {
            let now = monotonicMilliseconds()
            guard now >= nextAtMs else { return false }
            nextAtMs = now + 10
            let sent = nowNs()
            try? client.request(subject: "bench.echo", payload: [1, 2, 3, 4], timeoutMs: 10_000) { [weak self] result in
                if case .success = result { self?.ms.append(Double(nowNs() - sent) / 1e6) }
            }
            return true
        }

        func percentile(_ p: Double) -> Double {
            let sorted = ms.sorted()
            guard !sorted.isEmpty else { return .nan }
            return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
        }
    }
}

private func fmt(_ x: Double) -> String { x.isNaN ? "-" : String(format2: x) }

private extension String {
    init(format2 x: Double) {
        let scaled = (x * 100).rounded()
        let whole = Int(scaled / 100)
        let frac = Int(abs(scaled).truncatingRemainder(dividingBy: 100))
        self = "\(whole).\(frac < 10 ? "0" : "")\(frac)"
    }
}

/// Nanoseconds on `clock`: monotonic wall time, or (CLOCK_THREAD_CPUTIME_ID) the CPU time this
/// thread used, which leaves out the time other processes had the CPU.
private func nowNs(_ clock: clockid_t = CLOCK_MONOTONIC) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
