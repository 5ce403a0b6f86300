import Testing
import VigilCore
import VigilTestSupport
@testable import VigilServer

/// A session keeps its three buckets in narrower fields: each behaves exactly as a `TokenLevel`.
@Suite struct V1SessionTests {
    let rates = V1SessionRates(writes: .perMinute(30, capacity: 5), messages: .perMinute(50 * 60, capacity: 100),
                               subscribes: .perMinute(10 * 60, capacity: V1SessionRates.maxCapacity))

    @Test func everyBucketTakesAsATokenLevelDoes() {
        var rng = SplitMix64(state: 0x5E55)
        let start: Int64 = 1 << 40  // a clock far from zero: anchors are kept whole
        var session = V1Session(rates, nowMs: start)
        var levels = [TokenLevel(full: rates.writes, nowMs: start), TokenLevel(full: rates.messages, nowMs: start),
                      TokenLevel(full: rates.subscribes, nowMs: start)]
        let all = [rates.writes, rates.messages, rates.subscribes]
        var now = start
        for _ in 0..<20_000 {
            now += Int64.random(in: 0...40, using: &rng)
            let i = Int.random(in: 0..<3, using: &rng)
            let expected = levels[i].take(all[i], nowMs: now)
            let got: Int64?
            switch i {
            case 0: got = session.writes.take(all[i], nowMs: now)
            case 1: got = session.messages.take(all[i], nowMs: now)
            default: got = session.subscribes.take(all[i], nowMs: now)
            }
            #expect(got == expected)
        }
        #expect(session.writes == levels[0] && session.messages == levels[1] && session.subscribes == levels[2])
    }

    @Test func aSlotInTheTableIs40Bytes() {
        #expect(MemoryLayout<V1Session?>.stride <= 40)
    }
}
