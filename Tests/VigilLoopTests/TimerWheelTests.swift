import Testing
@testable import VigilLoop

extension TimerWheel {
    /// Test convenience: collect, then call `fire` for each due id.
    mutating func advance(toMs now: Int64, _ fire: (Int32) -> Void) {
        var due: [Int32] = []
        collectDue(atMs: now, into: &due)
        due.forEach(fire)
    }
}

@Suite struct TimerWheelTests {
    @Test func firesAtTheDeadlineNotBefore() {
        var wheel = TimerWheel(tickMs: 50, slots: 16, nowMs: 1_000)
        wheel.schedule(3, atMs: 1_200)
        var fired: [Int32] = []
        wheel.advance(toMs: 1_150) { fired.append($0) }
        #expect(fired.isEmpty)
        wheel.advance(toMs: 1_200) { fired.append($0) }
        #expect(fired == [3])
        #expect(!wheel.isScheduled(3))
        #expect(wheel.count == 0)
    }

    @Test func cancelAndRescheduleAreExact() {
        var wheel = TimerWheel(tickMs: 10, slots: 8, nowMs: 0)
        for id in Int32(0)..<100 { wheel.schedule(id, atMs: Int64(id) * 10 + 10) }
        for id in stride(from: Int32(0), to: 100, by: 2) { wheel.cancel(id) }
        wheel.schedule(1, atMs: 5_000)  // moved far away
        #expect(wheel.count == 50)
        var fired = Set<Int32>()
        wheel.advance(toMs: 1_000) { fired.insert($0) }
        let expected = Set(stride(from: Int32(3), to: 100, by: 2))
        #expect(fired == expected)
        #expect(wheel.isScheduled(1))
        wheel.advance(toMs: 5_000) { fired.insert($0) }
        #expect(fired.contains(1))
        #expect(wheel.count == 0)
    }

    @Test func deadlinesBeyondOneRotationWaitTheirTurn() {
        // 8 slots of 10 ms = one rotation of 80 ms; 250 ms is three rotations away.
        var wheel = TimerWheel(tickMs: 10, slots: 8, nowMs: 0)
        wheel.schedule(7, atMs: 250)
        var fired: [Int32] = []
        var now: Int64 = 0
        while now < 240 {
            now += 10
            wheel.advance(toMs: now) { fired.append($0) }
        }
        #expect(fired.isEmpty)
        wheel.advance(toMs: 250) { fired.append($0) }
        #expect(fired == [7])
    }

    @Test func dueIdsMayBeScheduledAgain() {
        var wheel = TimerWheel(tickMs: 10, slots: 8, nowMs: 0)
        wheel.schedule(2, atMs: 10)
        var count = 0
        var now: Int64 = 0
        for _ in 0..<10 {
            now += 10
            var due: [Int32] = []
            wheel.advance(toMs: now) { due.append($0) }
            for id in due { count += 1; wheel.schedule(id, atMs: now + 10) }
        }
        #expect(count == 10)
    }

    @Test func aPastDeadlineFiresOnTheNextAdvance() {
        var wheel = TimerWheel(tickMs: 10, slots: 8, nowMs: 1_000)
        wheel.schedule(0, atMs: 500)
        var fired: [Int32] = []
        wheel.advance(toMs: 1_010) { fired.append($0) }
        #expect(fired == [0])
    }

    @Test func aLongSleepFiresEverythingDueOnce() {
        var wheel = TimerWheel(tickMs: 10, slots: 8, nowMs: 0)
        for id in Int32(0)..<40 { wheel.schedule(id, atMs: Int64(id) * 7) }
        var fired: [Int32] = []
        wheel.advance(toMs: 10_000) { fired.append($0) }
        #expect(fired.sorted() == Array(0..<40))
    }
}
