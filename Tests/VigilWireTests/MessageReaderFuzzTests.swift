import Testing
@testable import VigilWire
import VigilTestSupport

/// Property tests: random valid streams round-trip through random chunking, and
/// random garbage never crashes the reader.
@Suite struct MessageReaderFuzzTests {
    /// A random stream of valid frames and the events it must produce.
    func randomStream(_ rng: inout SplitMix64) -> (bytes: [UInt8], events: [Ev]) {
        var bytes: [UInt8] = []
        var events: [Ev] = []
        let samples = ["a", "é", "€", "𝄞", "plain text ", "κόσμε"]
        for _ in 0..<Int.random(in: 1...6, using: &rng) {
            let isText = Bool.random(using: &rng)
            var message: [UInt8] = []
            if isText {
                for _ in 0..<Int.random(in: 0...20, using: &rng) {
                    message += Array(samples.randomElement(using: &rng)!.utf8)
                }
            } else {
                message = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            // Random fragmentation, at arbitrary byte positions (code points may split).
            var cuts = (0..<Int.random(in: 0...3, using: &rng)).map { _ in Int.random(in: 0...message.count, using: &rng) }
            cuts.sort()
            let fragments = split(message, at: cuts)
            events.append(.start(isText ? .text : .binary, compressed: false))
            for (i, fragment) in fragments.enumerated() {
                let opcode: Opcode = i == 0 ? (isText ? .text : .binary) : .continuation
                bytes += masked(opcode, fragment, fin: i == fragments.count - 1, key: UInt32.random(in: 0...UInt32.max, using: &rng))
                if !fragment.isEmpty { events.append(.data(fragment)) }
                // Maybe a control frame between fragments (after the last one,
                // it comes after the message's end).
                if i == fragments.count - 1 { events.append(.end) }
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    let payload = (0..<Int.random(in: 0...125, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    let ping = Bool.random(using: &rng)
                    bytes += masked(ping ? .ping : .pong, payload, key: UInt32.random(in: 0...UInt32.max, using: &rng))
                    events.append(ping ? .ping(payload) : .pong(payload))
                }
            }
        }
        return (bytes, coalesce(events))
    }

    @Test func randomValidStreamsRoundTrip() {
        var rng = SplitMix64(state: 0xF00D)
        for iteration in 0..<1_000 {
            let (bytes, expected) = randomStream(&rng)
            let cuts = (0..<Int.random(in: 0...8, using: &rng)).map { _ in Int.random(in: 0...bytes.count, using: &rng) }
            let events = coalesce(read(.server, max: 1 << 16, split(bytes, at: cuts)))
            if events != expected {
                Issue.record("iteration \(iteration): \(events) != \(expected)")
                return
            }
        }
    }

    @Test func garbageNeverCrashes() {
        var rng = SplitMix64(state: 0xBAD)
        for _ in 0..<2_000 {
            var bytes = (0..<Int.random(in: 0...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Sometimes start from a plausible header so deeper states are reached.
            if Bool.random(using: &rng), !bytes.isEmpty {
                bytes[0] = [0x81, 0x82, 0x01, 0x00, 0x89, 0x8A, 0x88].randomElement(using: &rng)!
                if bytes.count > 1 { bytes[1] = 0x80 | UInt8.random(in: 0...127, using: &rng) }
            }
            let cuts = (0..<Int.random(in: 0...5, using: &rng)).map { _ in Int.random(in: 0...bytes.count, using: &rng) }
            for role in [Role.server, .client] {
                let events = read(role, max: 1000, rsv: Bool.random(using: &rng) ? 0x40 : 0, split(bytes, at: cuts))
                // Failure, if any, is last (drive stops there); no event follows it.
                for event in events.dropLast() {
                    if case .failure = event { Issue.record("event after failure") }
                }
            }
        }
    }
}
