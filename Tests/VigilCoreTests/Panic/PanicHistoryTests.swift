import Testing
@testable import VigilCore
import VigilTestSupport

@Suite struct PanicHistoryTests {
    func event(_ seq: UInt64) -> PanicEvent {
        PanicEvent(seq: seq, at: Int64(seq) * 10, kind: .status(seq % 2 == 0 ? .red : .amber))
    }

    func history(capacity: Int, through last: UInt64) -> PanicHistory {
        var h = PanicHistory(capacity: capacity)
        for seq in 1...last { h.append(event(seq)) }
        return h
    }

    @Test func keepsTheLastCapacityEventsOldestFirstAcrossWraparound() {
        for last in UInt64(1)...23 {
            let h = history(capacity: 5, through: last)
            let first = last > 5 ? last - 4 : 1
            #expect(h.all.map(\.seq) == Array(first...last))
            #expect(h.firstSeq == first)
            #expect(h.count == Int(last - first + 1))
        }
    }

    @Test func eventsAfterSeqAreExactInsideTheWindowAndNilBeyondIt() {
        let h = history(capacity: 5, through: 12)      // holds 8...12
        #expect(h.events(after: 7)?.map(\.seq) == [8, 9, 10, 11, 12])
        #expect(h.events(after: 10)?.map(\.seq) == [11, 12])
        #expect(h.events(after: 10)?.first == event(11))
        #expect(h.events(after: 12) == [])
        #expect(h.events(after: 6) == nil)
        #expect(h.events(after: 0) == nil)
    }

    @Test func beforeTheRingFillsSinceZeroIsTheWholeStream() {
        let h = history(capacity: 5, through: 3)
        #expect(h.events(after: 0)?.map(\.seq) == [1, 2, 3])
        #expect(PanicHistory(capacity: 1).events(after: 0) == [])
    }

    @Test func capacityOneKeepsOnlyTheNewest() {
        let h = history(capacity: 1, through: 4)
        #expect(h.all.map(\.seq) == [4])
        #expect(h.events(after: 3)?.map(\.seq) == [4])
        #expect(h.events(after: 2) == nil)
    }

    @Test func eventBySeqIsTheHeldEventAcrossWraparoundAndNilOutsideTheWindow() {
        for last in UInt64(1)...23 {
            let h = history(capacity: 5, through: last)
            let first = last > 5 ? last - 4 : 1
            for seq in UInt64(0)...(last + 2) {
                #expect(h.event(seq: seq) == ((first...last).contains(seq) ? event(seq) : nil), "seq \(seq) of 1...\(last)")
            }
        }
        #expect(PanicHistory(capacity: 3).event(seq: 1) == nil)
    }
}
