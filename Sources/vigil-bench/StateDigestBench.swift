import ArgumentParser
import Glibc
import VigilCore
import VigilState

extension VigilBench {
    /// The state digest's cost (`StateDigest.of(map:panic:checkin:rules:)`, what the admin
    /// listener's `/state/digest` runs on the loop) for N pins and K panic streams.
    struct StateDigestBench: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "state-digest", abstract: "Time of the state digest over live hubs with N pins and K panic streams.")
        @Option(help: "Live pins (votes on every tenth).") var pins = 1_000_000
        @Option(help: "Panic streams, each with --events location updates in its history.") var streams = 1_000
        @Option(help: "Location events per stream.") var events = 100
        @Option(help: "Runs; the median is reported, with the fastest and slowest.") var runs = 5
        @Option(help: "Random seed.") var seed: UInt64 = 1

        func run() throws {
            let now = Int64(time(nil)) * 1000
            var hub = MapHub(settings: PinSettings())
            var panic = PanicHub(settings: PanicSettings())
            benchState(pins: pins, streams: streams, events: events, seed: seed, now: now, map: &hub, panic: &panic)
            let checkin = CheckinHub(settings: CheckinSettings())
            let rules = StateDigest.Rules(now: now + 1, panic: PanicSettings(), checkin: CheckinSettings())
            var times: [Double] = [], cpuTimes: [Double] = []
            var digests: Set<String> = []
            var last: StateDigest?
            for _ in 0..<runs {
                let cpuStart = threadCPUSeconds()
                times.append(seconds { last = StateDigest.of(map: hub, panic: panic, checkin: checkin, rules: rules) })
                cpuTimes.append(threadCPUSeconds() - cpuStart)
                digests.insert(last!.hex)
            }
            guard digests.count == 1, let digest = last, digest.pins == hub.store.count, digest.streams == panic.count else {
                throw ValidationError("the digest changed between runs or miscounted: \(digests), \(String(describing: last))")
            }
            let ms = median(cpuTimes) * 1000
            print("state-digest: \(pins) pins (every tenth voted), \(streams) panic streams x \(events) events, \(runs) runs")
            print("  digest \(digest.hex.prefix(16))…: median \(oneDecimal(ms)) ms of CPU (fastest \(oneDecimal(cpuTimes.min()! * 1000)), slowest \(oneDecimal(cpuTimes.max()! * 1000))); median \(oneDecimal(median(times) * 1000)) ms elapsed")
            print("  \(Int(ms * 1e6 / Double(max(pins, 1)))) ns per pin (the streams' share included)")
        }
    }
}

/// The calling thread's CPU time (user + system) in seconds: what a computation costs the loop
/// thread, unlike elapsed time, which also counts the time other processes had the CPU.
func threadCPUSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}
