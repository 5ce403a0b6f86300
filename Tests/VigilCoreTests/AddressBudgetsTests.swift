import Testing
@testable import VigilCore
import VigilTestSupport

@Suite struct AddressBudgetsTests {
    static func small() -> AddressBudgetSettings {
        var s = AddressBudgetSettings()
        s.panicStarts = .perMinute(6, capacity: 3)
        s.maxOpenStreams = 3
        s.pinCreates = .perMinute(12, capacity: 4)
        s.maxLivePins = 4
        s.subscribes = .perSecond(2, capacity: 5)
        s.voterMemoryMs = 60_000
        s.maxTrackedAddresses = 5
        return s
    }

    /// Random opens and closes (doubled, of unknown ids, interleaved with sweeps and a full
    /// table) against a plain recount: each address's open streams and live pins are exactly what
    /// it opened and has not closed, never negative, the capacity refusals come exactly at the
    /// limits, and the table never holds more than its maximum.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func countsMatchARecount(seed: UInt64) {
        var rng = SplitMix64(state: seed)
        let settings = Self.small()
        var budgets = AddressBudgets(settings: settings)
        var streams: [StreamID: AddressKey] = [:]          // the model: what is open, and whose
        var pins: [PinID: AddressKey] = [:]
        var closed: [StreamID] = [], removed: [PinID] = []
        var now: Int64 = 0
        var refusals = 0, untracked = 0
        for step in 0..<4_000 {
            now += Int64(rng.next() % 3_000)
            let key = AddressKey(rng.next() % 8)            // more addresses than the table holds
            switch rng.next() % 9 {
            case 0, 1:
                let open = streams.values.filter { $0 == key }.count
                let admission = budgets.admitPanicStart(key, now: now)
                if open >= settings.maxOpenStreams { #expect(admission == .overLimit(.openStreams), "step \(step)") }
                if admission == .admitted {
                    let id = StreamID(high: rng.next(), low: UInt64(step))
                    budgets.streamStarted(id, by: key, now: now)
                    if budgets.openStreams(of: key).contains(id) { streams[id] = key } else { untracked += 1 }
                } else {
                    refusals += 1
                }
            case 2, 3:
                let live = pins.values.filter { $0 == key }.count
                let admission = budgets.admitPinCreate(key, now: now)
                if live >= settings.maxLivePins { #expect(admission == .overLimit(.livePins), "step \(step)") }
                if admission == .admitted {
                    let id = PinID(high: rng.next(), low: UInt64(step))
                    budgets.pinCreated(id, by: key, now: now)
                    pins[id] = key
                } else {
                    refusals += 1
                }
            case 4:
                let pick = streams.keys.sorted().first ?? closed.last ?? StreamID(high: 9, low: 9)
                budgets.streamEnded(pick, now: now)
                if let gone = streams.removeValue(forKey: pick) { _ = gone; closed.append(pick) }
            case 5:
                let ids = pins.keys.sorted()
                let pick = ids.isEmpty || rng.next() % 5 == 0 ? (removed.last ?? PinID(high: 9, low: 9)) : ids[Int(rng.next() % UInt64(ids.count))]
                budgets.pinRemoved(pick, now: now)
                if pins.removeValue(forKey: pick) != nil { removed.append(pick) }
            case 6:
                _ = budgets.admitSubscribe(key, now: now)
            case 7:
                _ = budgets.voter(for: key, now: now)
            default:
                budgets.sweep(now: now)
            }
            #expect(budgets.count <= settings.maxTrackedAddresses)
            for k in 0..<8 as Range<AddressKey> {
                #expect(Set(budgets.openStreams(of: k)) == Set(streams.filter { $0.value == k }.keys), "step \(step) key \(k)")
                #expect(budgets.livePins(of: k) == pins.values.filter { $0 == k }.count, "step \(step) key \(k)")
            }
        }
        #expect(refusals > 50 && untracked > 0 && !closed.isEmpty && !removed.isEmpty,
                "the walk met every case: \(refusals) refusals, \(untracked) untracked starts")
    }

    /// A refusal's retry time is exact: the same request a millisecond before it is refused, at it
    /// admitted.
    @Test func retryAfterIsExact() {
        var rng = SplitMix64(state: 3)
        var budgets = AddressBudgets(settings: Self.small())
        var now: Int64 = 0
        var checked = 0
        for _ in 0..<2_000 {
            now += Int64(rng.next() % 700)
            let key = AddressKey(rng.next() % 3)
            let kind = rng.next() % 3
            func admit(_ b: inout AddressBudgets, at t: Int64) -> AddressAdmission {
                switch kind {
                case 0: return b.admitPanicStart(key, now: t)
                case 1: return b.admitPinCreate(key, now: t)
                default: return b.admitSubscribe(key, now: t)
                }
            }
            guard case .rateLimited(let retry) = admit(&budgets, at: now) else { continue }
            var early = budgets, onTime = budgets
            #expect(retry >= 1)
            #expect(admit(&early, at: now + retry - 1) == .rateLimited(retryAfterMs: 1))
            #expect(admit(&onTime, at: now + retry) == .admitted)
            checked += 1
        }
        #expect(checked > 100)
        let error = AddressAdmission.rateLimited(retryAfterMs: 1_850).error
        #expect(error?.code == "rate_limited" && error?.retryAfterMs == 1_850)
        #expect(AddressAdmission.overLimit(.openStreams).error?.code == "capacity_exceeded" && AddressAdmission.admitted.error == nil)
    }

    /// A full table of addresses that hold something: a newcomer's panic starts and subscribes
    /// are admitted untracked, its pin creates and votes refused; once the holders let go and
    /// their buckets refill, sweeping frees the room.
    @Test func aFullTableAdmitsPeopleInDangerAndStaysBounded() {
        let settings = Self.small()
        var budgets = AddressBudgets(settings: settings)
        for key in 0..<5 as Range<AddressKey> {
            #expect(budgets.admitPinCreate(key, now: 0) == .admitted)
            budgets.pinCreated(PinID(high: key, low: 1), by: key, now: 0)
        }
        #expect(budgets.count == 5)
        #expect(budgets.admitPanicStart(99, now: 1_000_000) == .admitted)
        budgets.streamStarted(StreamID(high: 99, low: 1), by: 99, now: 1_000_000)
        #expect(budgets.openStreams(of: 99).isEmpty, "not tracked")
        #expect(budgets.admitSubscribe(99, now: 1_000_000) == .admitted)
        #expect(budgets.admitPinCreate(99, now: 1_000_000) == .overLimit(.trackedAddresses))
        #expect(budgets.voter(for: 99, now: 1_000_000) == nil)
        #expect(budgets.count == 5)
        for key in 0..<5 as Range<AddressKey> { budgets.pinRemoved(PinID(high: key, low: 1), now: 1_000_000) }
        #expect(budgets.admitPinCreate(99, now: 1_000_000) == .admitted, "the table swept itself to make room")
        #expect(budgets.count == 1)
    }

    /// Many addresses passing through: the table never grows past its maximum, and a sweep
    /// touches only the entries that are due.
    @Test func sweepingCostsOnlyWhatIsDue() {
        var settings = Self.small()
        settings.maxTrackedAddresses = 100_000
        var budgets = AddressBudgets(settings: settings)
        for key in 0..<10_000 as Range<AddressKey> {
            _ = budgets.admitSubscribe(key, now: Int64(key) * 1_000)        // full again 500 ms later
        }
        #expect(budgets.count == 10_000 && budgets.droppable.count == 10_000)
        #expect(budgets.sweep(now: 9_000 + 499) == 9)                       // keys 0..8
        #expect(budgets.count == 9_991 && budgets.droppable.count == 9_991)
        #expect(budgets.sweep(now: 9_500) == 1)
        budgets.sweep(now: .max)
        #expect(budgets.count == 0 && budgets.droppable.isEmpty)
    }

    /// An address keeps one voter number while it is known, so reconnecting does not make it a
    /// new voter; numbers are small, counted up from `firstVoter`, and never given twice.
    @Test func votersAreStablePerAddressAndNeverReused() {
        var budgets = AddressBudgets(settings: Self.small(), firstVoter: 500)
        let a = budgets.voter(for: 0xDEAD_BEEF, now: 0)
        let b = budgets.voter(for: 0xFEED, now: 0)
        #expect(a == 500 && b == 501)
        #expect(budgets.voter(for: 0xDEAD_BEEF, now: 59_999) == 500)
        budgets.sweep(now: 59_999 + 60_000 - 1)
        #expect(budgets.voter(for: 0xDEAD_BEEF, now: 119_998) == 500, "kept for voterMemoryMs after its last vote")
        budgets.sweep(now: 119_998 + 60_000)
        #expect(budgets.count == 0)
        #expect(budgets.voter(for: 0xDEAD_BEEF, now: 200_000) == 502, "forgotten: a new number, not an old one")
    }
}
