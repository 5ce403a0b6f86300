import Testing
@testable import VigilCore
import VigilTestSupport

@Suite struct IdempotencyTableTests {
    static func answer(_ n: UInt8, at createdAt: Int64 = 1_000) -> KeptAnswer {
        KeptAnswer(lookup: [UInt8](repeating: n, count: 32), requestDigest: [UInt8](repeating: ~n, count: 32),
                   createdAt: createdAt, sealed: [UInt8](repeating: n, count: 40))
    }

    static func table(window: Int = 60, all: Int = 100, perAddress: Int = 10) -> IdempotencyTable {
        IdempotencyTable(settings: IdempotencySettings(windowSeconds: window, maxKeys: all, maxKeysPerAddress: perAddress))
    }

    @Test func anAnswerIsFoundUntilItsWindowEnds() {
        var t = Self.table(window: 60)
        let inserted = t.insert(Self.answer(1, at: 1_000), address: 7, now: 1_000)
        #expect(inserted)
        #expect(t.answer(Self.answer(1).lookup, now: 60_999) == Self.answer(1, at: 1_000))
        #expect(t.answer(Self.answer(1).lookup, now: 61_000) == nil, "expired at created + window")
        #expect(t.answer(Self.answer(2).lookup, now: 1_000) == nil)
        #expect(t.sweep(now: 61_000) == 1)
        #expect(t.count == 0 && t.byteCount == 0 && t.evicted == 0, "expiry is not eviction")
    }

    @Test func theFirstAnswerIsKept() {
        var t = Self.table()
        var other = Self.answer(1)
        other.sealed = [9, 9, 9]
        let first = t.insert(Self.answer(1), address: 1, now: 1_000)
        let second = t.insert(other, address: 1, now: 1_000)
        #expect(first && !second)
        #expect(t.answer(other.lookup, now: 1_000)?.sealed == Self.answer(1).sealed)
        #expect(t.count == 1)
    }

    @Test func anAddressOverItsBoundLosesItsOwnOldestFirst() {
        var t = Self.table(all: 100, perAddress: 3)
        for n: UInt8 in 1...3 { t.insert(Self.answer(n), address: 1, now: 1_000) }
        t.insert(Self.answer(50), address: 2, now: 1_000)  // another address, older than 4
        t.insert(Self.answer(4), address: 1, now: 1_000)
        #expect(t.evicted == 1)
        #expect(t.answer(Self.answer(1).lookup, now: 1_000) == nil, "address 1's oldest went")
        for n: UInt8 in [2, 3, 4, 50] { #expect(t.answer(Self.answer(n).lookup, now: 1_000) != nil) }
        #expect(t.count == 4)
    }

    @Test func aFullTableLosesTheOldestOfAll() {
        var t = Self.table(all: 3, perAddress: 3)
        t.insert(Self.answer(1), address: 1, now: 1_000)
        t.insert(Self.answer(2), address: 2, now: 1_000)
        t.insert(Self.answer(3), address: nil, now: 1_000)
        t.insert(Self.answer(4), address: 3, now: 1_000)
        #expect(t.evicted == 1 && t.count == 3)
        #expect(t.answer(Self.answer(1).lookup, now: 1_000) == nil)
        // Address 1 holds nothing now: it may keep three again without touching others.
        t.insert(Self.answer(5), address: 1, now: 1_000)
        #expect(t.answer(Self.answer(2).lookup, now: 1_000) == nil, "still the oldest of all")
        #expect(t.answer(Self.answer(5).lookup, now: 1_000) != nil)
    }

    @Test func aForgottenAnswerLeavesNoTraceInTheBounds() {
        var t = Self.table(all: 2, perAddress: 2)
        t.insert(Self.answer(1), address: 1, now: 1_000)
        t.insert(Self.answer(2), address: 1, now: 1_000)
        t.forget(Self.answer(1).lookup)
        t.insert(Self.answer(3), address: 1, now: 1_000)
        #expect(t.evicted == 0 && t.count == 2)
        t.insert(Self.answer(4), address: 1, now: 1_000)
        #expect(t.evicted == 1)
        #expect(t.answer(Self.answer(2).lookup, now: 1_000) == nil, "the oldest live one, not the forgotten one's slot")
    }

    @Test func exportIsOldestFirstAndSkipsExpired() {
        var t = Self.table(window: 10)
        t.insert(Self.answer(3, at: 500), address: 1, now: 1_000)
        t.insert(Self.answer(1, at: 5_000), address: 1, now: 5_000)
        t.insert(Self.answer(2, at: 6_000), address: nil, now: 6_000)
        #expect(t.export(now: 10_600).map(\.lookup[0]) == [1, 2])
        let expired = t.insert(Self.answer(9, at: 0), address: nil, now: 10_000)
        #expect(!expired, "an answer already expired is not kept")
    }

    /// Many inserts and forgets against a plain model: the bounds hold and the survivors are the
    /// newest ones the model keeps (lazy queues and compaction change nothing visible).
    @Test func boundsHoldAgainstAModel() {
        var t = Self.table(window: 1_000_000, all: 20, perAddress: 5)
        var model: [(UInt8, AddressKey)] = []
        var rng = SplitMix64(state: 3)
        for n in 0..<200 {
            let address = AddressKey(rng.next() % 6)
            if rng.next() % 5 == 0, !model.isEmpty {
                let i = Int(rng.next() % UInt64(model.count))
                t.forget(Self.answer(model[i].0).lookup)
                model.remove(at: i)
            }
            let id = UInt8(n)
            if model.contains(where: { $0.0 == id }) { t.forget(Self.answer(id).lookup); model.removeAll { $0.0 == id } }
            if model.filter({ $0.1 == address }).count >= 5, let i = model.firstIndex(where: { $0.1 == address }) { model.remove(at: i) }
            if model.count >= 20 { model.removeFirst() }
            t.insert(Self.answer(id), address: address, now: 1_000)
            model.append((id, address))
            #expect(t.count == model.count)
        }
        #expect(t.export(now: 1_000).map(\.lookup[0]) == model.map(\.0), "the survivors, oldest first")
    }
}
