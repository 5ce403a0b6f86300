import XCTest
@testable import VigilLoad

final class CheckErrorsTests: XCTestCase {
    func testKeepsTheFirstAndCountsAll() {
        var errors = CheckErrors(limit: 2)
        XCTAssertTrue(errors.isEmpty)
        errors.record("a")
        errors.record("b")
        errors.record("c")
        XCTAssertEqual(errors.count, 3)
        XCTAssertEqual(errors.first, ["a", "b"])
    }

    func testBuildsNoMessageOnceFull() {
        var errors = CheckErrors(limit: 1)
        var built = 0
        func message() -> String {
            built += 1
            return "m"
        }
        for _ in 0..<10 { errors.record(message()) }
        XCTAssertEqual(built, 1)
        XCTAssertEqual(errors.count, 10)
    }

    func testMergeAddsCountsAndFillsRoom() {
        var a = CheckErrors(limit: 3)
        a.record("a1")
        var b = CheckErrors(limit: 10)
        for i in 1...5 { b.record("b\(i)") }
        a.merge(b)
        XCTAssertEqual(a.count, 6)
        XCTAssertEqual(a.first, ["a1", "b1", "b2"])
    }
}
