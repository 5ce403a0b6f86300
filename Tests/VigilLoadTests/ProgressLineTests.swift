import XCTest
@testable import VigilLoad

final class ProgressLineTests: XCTestCase {
    func testTheLineHasEveryFigure() {
        let line = ProgressLine.format(elapsedSeconds: 12.2, connections: 1020, sent: 24_000, sentPerSecond: 2000,
                                       delivered: 2_400_000, deliveredPerSecond: 199_999.6, p99Ns: 1_234_000, errors: 0)
        XCTAssertEqual(line, "[  12s] conns 1020  sent 24000 (2000/s)  delivered 2400000 (200000/s)  p99 1.234 ms  errors 0")
    }

    func testNoSamplesShowADash() {
        let line = ProgressLine.format(elapsedSeconds: 1, connections: 0, sent: 0, sentPerSecond: 0,
                                       delivered: 0, deliveredPerSecond: 0, p99Ns: nil, errors: 3)
        XCTAssertTrue(line.contains("p99 -"))
        XCTAssertTrue(line.hasSuffix("errors 3"))
        XCTAssertFalse(line.contains("\n"))
    }
}
