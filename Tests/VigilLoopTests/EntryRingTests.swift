import Testing
import VigilBytes
@testable import VigilLoop

@Suite struct EntryRingTests {
    /// Random appends, prepends, pops, filters and clears, checked against an array after every
    /// step: the ring wraps around its block and grows (32, 64, 128 entries) without losing order.
    @Test func behavesAsAnArrayAcrossWrapsAndGrowth() {
        let chunk = ByteChunk(capacity: 1)
        var seedState: UInt64 = 0x9E37_79B9_7F4A_7C15
        func nextRandom(_ bound: Int) -> Int {  // deterministic (splitmix64), so a failure repeats
            seedState &+= 0x9E37_79B9_7F4A_7C15
            var z = seedState
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
        var ring = EntryRing()
        var model: [Int32] = []
        var next: Int32 = 0
        func entry(_ value: Int32) -> OutputQueue.Entry {
            OutputQueue.Entry(holding: chunk, start: value, end: value &+ 1, tag: UInt64(value % 3), owned: false)
        }
        for step in 0..<20_000 {
            switch nextRandom(100) {
            case 0..<45:
                ring.append(entry(next)); model.append(next); next += 1
            case 45..<55:
                ring.prepend(entry(next)); model.insert(next, at: 0); next += 1
            case 55..<90:
                #expect(ring.popFirst()?.start == model.first)
                if !model.isEmpty { model.removeFirst() }
            case 90..<95:
                let dropTag = UInt64(nextRandom(3))
                ring.retain { $0.tag != dropTag }
                model.removeAll { UInt64($0 % 3) == dropTag }
            case 95..<97 where !model.isEmpty:
                let i = nextRandom(model.count)
                ring[i].end = ring[i].start &+ 7
                #expect(ring[i].length == 7)
                ring[i].end = ring[i].start &+ 1
            case 97:
                ring.removeAll(); model.removeAll()
            default:
                break
            }
            #expect(ring.count == model.count, "step \(step)")
            #expect(ring.map(\.start) == model, "step \(step)")
            #expect(ring.last?.start == model.last)
            if ring.count != model.count { return }
        }
        ring.removeAll()
        #expect(ring.isEmpty && ring.popFirst() == nil)
    }

    /// The queue holds the ring as one pointer: an idle connection pays 8 bytes for it.
    @Test func theRingIsOnePointer() {
        #expect(MemoryLayout<EntryRing>.size == 8)
    }
}
