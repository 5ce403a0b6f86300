import XCTest
@testable import VigilLoad

final class TextFormatTests: XCTestCase {
    func testFixedRoundsToTheGivenPlaces() {
        XCTAssertEqual(TextFormat.fixed(1.23456, 3), "1.235")
        XCTAssertEqual(TextFormat.fixed(0.0004, 3), "0.000")
        XCTAssertEqual(TextFormat.fixed(2, 2), "2.00")
        XCTAssertEqual(TextFormat.fixed(0.05, 1), "0.1")
        XCTAssertEqual(TextFormat.fixed(-1.5, 1), "-1.5")
        XCTAssertEqual(TextFormat.fixed(-0.0001, 2), "0.00", "no negative zero")
        XCTAssertEqual(TextFormat.fixed(1234.5, 0), "1235")
        XCTAssertEqual(TextFormat.fixed(.nan, 2), "-")
        XCTAssertEqual(TextFormat.fixed(.infinity, 2), "-")
    }

    func testMillisecondsAndMebibytes() {
        XCTAssertEqual(TextFormat.ms(1_234_567), "1.235")
        XCTAssertEqual(TextFormat.ms(999), "0.001")
        XCTAssertEqual(TextFormat.mib(1536), "1.5")
    }

    func testPadding() {
        XCTAssertEqual(TextFormat.right("7", 3), "  7")
        XCTAssertEqual(TextFormat.left("ab", 4), "ab  ")
        XCTAssertEqual(TextFormat.right("toolong", 3), "toolong")
    }

    func testNameWidthFitsTheLongestNameAndTwoSpaces() {
        XCTAssertEqual(TextFormat.nameWidth([]), 16)
        XCTAssertEqual(TextFormat.nameWidth(["sent", "delivered"]), 16, "short names keep the usual column")
        XCTAssertEqual(TextFormat.nameWidth(["exactly fourteen"]), 18)
        XCTAssertEqual(TextFormat.nameWidth(["a", "server CPU µs per re-subscribe"]), 32, "µ is one character")
        XCTAssertEqual(TextFormat.nameWidth(["ab"], minimum: 0), 4)
    }
}
