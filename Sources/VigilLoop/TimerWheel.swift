/// A hashed timing wheel over small integer ids (Vigil uses the connection's fd).
///
/// Each id holds at most one deadline. Scheduling and cancelling are O(1) and allocate nothing
/// once the id range has grown: the per-slot lists are intrusive, kept as parallel arrays indexed
/// by id (`next`, `prev`, `deadline`), so 100,000 connections cost 24 bytes each here and no
/// timer objects. Advancing visits only the slots whose tick has passed; an entry whose deadline
/// is more than one rotation away stays in its slot and is skipped (its deadline is checked), so
/// long timeouts cost one look per rotation.
public struct TimerWheel {
    private static let none: Int32 = -1

    public let tickMs: Int64
    private let mask: Int
    private var heads: [Int32]
    private var next: [Int32] = []
    private var prev: [Int32] = []
    private var deadlineTick: [Int64] = []
    private var slotOf: [Int32] = []
    private var currentTick: Int64
    public private(set) var count = 0

    /// - Parameters:
    ///   - tickMs: resolution; deadlines are rounded up to a tick.
    ///   - slots: rounded up to a power of two; one rotation spans `slots * tickMs`.
    ///   - nowMs: the clock's current reading.
    public init(tickMs: Int64, slots: Int = 1024, nowMs: Int64) {
        precondition(tickMs > 0)
        var size = 1
        while size < slots { size <<= 1 }
        self.tickMs = tickMs
        self.mask = size - 1
        self.heads = Array(repeating: Self.none, count: size)
        self.currentTick = nowMs / tickMs
    }

    /// Whether `id` has a pending deadline.
    public func isScheduled(_ id: Int32) -> Bool {
        Int(id) < slotOf.count && slotOf[Int(id)] != Self.none
    }

    /// Sets (or moves) the deadline of `id` to `deadlineMs`. A deadline in the past fires at the next advance.
    public mutating func schedule(_ id: Int32, atMs deadlineMs: Int64) {
        precondition(id >= 0)
        grow(to: Int(id))
        if slotOf[Int(id)] != Self.none { unlink(id) }
        var tick = (deadlineMs + tickMs - 1) / tickMs
        if tick <= currentTick { tick = currentTick + 1 }
        let slot = Int(tick) & mask
        let i = Int(id)
        deadlineTick[i] = tick
        slotOf[i] = Int32(slot)
        prev[i] = Self.none
        next[i] = heads[slot]
        if heads[slot] != Self.none { prev[Int(heads[slot])] = id }
        heads[slot] = id
        count += 1
    }

    /// Removes the deadline of `id`, if any.
    public mutating func cancel(_ id: Int32) {
        guard isScheduled(id) else { return }
        unlink(id)
    }

    /// Appends to `due`, in no particular order, every id whose deadline is at or before `nowMs`,
    /// unscheduling each. The caller then acts on them and may schedule any of them again
    /// (collecting first keeps the wheel out of its own callbacks: no re-entrant mutation).
    public mutating func collectDue(atMs nowMs: Int64, into due: inout [Int32]) {
        let nowTick = nowMs / tickMs
        guard nowTick > currentTick else { return }
        let span = min(nowTick - currentTick, Int64(mask + 1))
        var tick = currentTick + 1
        for _ in 0..<span {
            var id = heads[Int(tick) & mask]
            while id != Self.none {
                let following = next[Int(id)]
                if deadlineTick[Int(id)] <= nowTick {
                    unlink(id)
                    due.append(id)
                }
                id = following
            }
            tick += 1
        }
        currentTick = nowTick
    }

    private mutating func unlink(_ id: Int32) {
        let i = Int(id)
        let slot = Int(slotOf[i])
        let p = prev[i], n = next[i]
        if p != Self.none { next[Int(p)] = n } else { heads[slot] = n }
        if n != Self.none { prev[Int(n)] = p }
        slotOf[i] = Self.none
        count -= 1
    }

    private mutating func grow(to index: Int) {
        guard index >= slotOf.count else { return }
        let newCount = max(index + 1, slotOf.count * 2, 64)
        let extra = newCount - slotOf.count
        next.append(contentsOf: repeatElement(Self.none, count: extra))
        prev.append(contentsOf: repeatElement(Self.none, count: extra))
        deadlineTick.append(contentsOf: repeatElement(0, count: extra))
        slotOf.append(contentsOf: repeatElement(Self.none, count: extra))
    }
}
