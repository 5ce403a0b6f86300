import Testing
@testable import VigilCore
@testable import VigilState

/// The binary forms of an e2e stream's parts (E2EFields): round trips, and every damaged count
/// or order refused with a clear error rather than a huge allocation or a wrong value.
@Suite struct E2EFieldsTests {
    let kid = E2EKeyID(bytes: Array(0xA0...0xAF))

    func sealed(_ n: Int, _ fill: UInt8 = 9) -> SealedBytes { SealedBytes(bytes: [UInt8](repeating: fill, count: n)) }

    /// Reads the whole of `bytes` (StateReaderTests' helper: nothing may be left over).
    func read<T>(_ bytes: [UInt8], _ body: (inout StateReader) throws(StateError) -> T) throws(StateError) -> T {
        try StateReaderTests().read(bytes, body)
    }

    @Test func aPointRoundTripsAsItsOpaqueBytes() throws {
        let point = SealedPoint(kid: kid, status: .amber, sealed: sealed(92, 0x5A))
        var w = StateWriter()
        E2EFields.write(point, to: &w)
        #expect(w.bytes.count == 16 + 1 + 4 + 92)
        #expect(Array(w.bytes[0..<16]) == Array(0xA0...0xAF), "the kid is stored as its bytes")
        #expect(w.bytes[16] == 2)
        #expect(Array(w.bytes[21...]) == [UInt8](repeating: 0x5A, count: 92), "the sealed bytes as the client sent them")
        #expect(try read(w.bytes) { (r: inout StateReader) throws(StateError) in try E2EFields.readPoint(&r) } == point)
    }

    @Test func keysRoundTripWithTheirBoxesInMemberOrder() throws {
        let keys = E2EKeys(kid: kid, boxes: [MemberBox(member: 9, box: sealed(60, 1)), MemberBox(member: 2, box: sealed(60, 2))])
        var w = StateWriter()
        E2EFields.write(keys, to: &w)
        let back = try read(w.bytes) { (r: inout StateReader) throws(StateError) in try E2EFields.readKeys(&r) }
        #expect(back == keys)
        #expect(back.box(forMember: 2) == sealed(60, 2))
        #expect(E2EFields.sizes(back) == (2, 120))
        var none = StateWriter()
        E2EFields.write(E2EKeys(kid: kid, boxes: []), to: &none)
        #expect(try read(none.bytes) { (r: inout StateReader) throws(StateError) in try E2EFields.readKeys(&r) }.boxes.isEmpty)
    }

    @Test func aSealedLengthOutsideTheFormatIsRefused() {
        for n: UInt32 in [0, 27, 65_537, .max] {
            let bytes = SnapshotCodecTests.le32(n) + [UInt8](repeating: 0, count: 64)
            #expect(throws: StateError.self) { try read(bytes) { (r: inout StateReader) throws(StateError) in try E2EFields.readSealed(&r) } }
        }
        // A length within bounds but past the end of the file.
        #expect(throws: StateError.self) {
            try read(SnapshotCodecTests.le32(200) + [UInt8](repeating: 0, count: 64)) { (r: inout StateReader) throws(StateError) in
                try E2EFields.readSealed(&r)
            }
        }
    }

    @Test func damagedBoxesAreRefused() {
        func keysBytes(count: UInt32, members: [UInt32]) -> [UInt8] {
            var w = StateWriter()
            E2EFields.write(kid, to: &w)
            w.u32(count)
            for m in members { w.u32(m); E2EFields.write(sealed(40), to: &w) }
            return w.bytes
        }
        let read = { (bytes: [UInt8]) throws(StateError) -> E2EKeys in
            try self.read(bytes) { (r: inout StateReader) throws(StateError) in try E2EFields.readKeys(&r) }
        }
        #expect((try? read(keysBytes(count: 2, members: [1, 2])))?.boxes.count == 2)
        #expect(throws: StateError.self) { try read(keysBytes(count: 2, members: [2, 2])) }       // a member twice
        #expect(throws: StateError.self) { try read(keysBytes(count: 2, members: [3, 1])) }       // out of order
        #expect(throws: StateError.self) { try read(keysBytes(count: 1, members: [0])) }          // no member 0
        #expect(throws: StateError.self) { try read(keysBytes(count: 1_000_000, members: [1])) }  // a count the bytes cannot hold
    }
}
