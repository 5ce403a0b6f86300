import ArgumentParser
import Glibc
import VigilClient

/// `vigil-bench e2e`: what an end-to-end encrypted panic update costs the Swift client (the
/// owner's phone seals each update, each watcher opens it), through `E2E.seal` / `E2E.open`, the
/// public API an app calls: the plaintext's JSON and padding, a fresh nonce from the system's
/// generator, AES-256-GCM (libcrypto's EVP on Linux), base64url, and on opening the JSON parse and
/// checks. The daemon's side (it never opens a value) is `vigil-load panic --e2e`.
struct E2EBench: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "e2e", abstract: "The Swift client's cost to seal and open an e2e panic update.")
    @Option(help: "Updates sealed and opened per run.") var updates = 20_000
    @Option(help: "Runs; the median is reported.") var runs = 5
    @Option(help: "Note length in bytes (0: no note), to see the cost grow with the padded size.") var note = 0

    func run() throws {
        let key = StreamKey.generate()
        let text = note > 0 ? String(repeating: "n", count: note) : nil
        // A phone's fix with full-precision doubles, as the clear benchmark sends.
        let positions = (0..<updates).map { i in
            E2EPosition(lat: 52.520_008_123_456 + Double(i) * 1e-7, lon: 13.404_954_987_654 - Double(i) * 1e-7,
                        accuracyM: 6, heading: 271.5, speedMps: 1.4, note: text)
        }
        var sealNs: [Double] = [], openNs: [Double] = []
        var sealedChars = 0
        for _ in 0..<runs {
            var sealed: [String] = []
            sealed.reserveCapacity(updates)
            let t0 = cpuNs()
            for (i, p) in positions.enumerated() {
                sealed.append(try E2E.seal(p, key: key, seq: UInt64(i + 2), status: .red))
            }
            let t1 = cpuNs()
            for (i, s) in sealed.enumerated() {
                let p = try E2E.open(s, key: key, seq: UInt64(i + 2), status: .red)
                precondition(p.lat == positions[i].lat, "opened a different position")
            }
            let t2 = cpuNs()
            sealNs.append(Double(t1 - t0) / Double(updates))
            openNs.append(Double(t2 - t1) / Double(updates))
            sealedChars = sealed[0].utf8.count
        }
        func median(_ v: [Double]) -> Double { let s = v.sorted(); return s[s.count / 2] }
        func f(_ v: Double) -> String { String(format: "%.2f", v / 1000) }
        print("e2e seal: median \(f(median(sealNs))) µs per update (runs: \(sealNs.map(f).joined(separator: ", ")))")
        print("e2e open: median \(f(median(openNs))) µs per update (runs: \(openNs.map(f).joined(separator: ", ")))")
        print("sealed value: \(sealedChars) characters (\(sealedChars * 3 / 4) bytes); \(updates) updates per run, note \(note) bytes, thread CPU time")
    }

    private func cpuNs() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }
}
