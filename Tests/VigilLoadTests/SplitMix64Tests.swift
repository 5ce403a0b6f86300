import XCTest
@testable import VigilLoad

final class SplitMix64Tests: XCTestCase {
    func testMatchesTheReferenceOutput() {
        // The reference implementation (Vigna, splitmix64.c) from state 0.
        var mix = SplitMix64(state: 0)
        XCTAssertEqual(mix.next(), 0xE220_A839_7B1D_CDAF)
        XCTAssertEqual(mix.next(), 0x6E78_9E6A_A1B9_65F4)
    }

    func testDoubleTakesOneValueAndScalesItsTop53Bits() {
        var mix = SplitMix64(state: 0)
        // 0xE220_A839_7B1D_CDAF >> 11, over 2^53, is 0.88331...; scaled into 10 ..< 20.
        XCTAssertEqual(mix.double(10, 20), 10 + 10 * Double(0xE220_A839_7B1D_CDAF as UInt64 >> 11) / 9_007_199_254_740_992)
        XCTAssertEqual(mix.next(), 0x6E78_9E6A_A1B9_65F4, "exactly one value was drawn")
        var wide = SplitMix64(state: 99)
        for _ in 0..<10_000 {
            let d = wide.double(-180, 180)
            XCTAssertTrue(d >= -180 && d < 180, "\(d)")
        }
    }
}
