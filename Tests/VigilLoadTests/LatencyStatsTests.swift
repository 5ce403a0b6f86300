import XCTest
@testable import VigilLoad

final class LatencyStatsTests: XCTestCase {
    func testEmptyStatsAreZero() {
        let stats = LatencyStats()
        XCTAssertEqual(stats.count, 0)
        XCTAssertEqual(stats.percentile(99), 0)
        XCTAssertEqual(stats.max, 0)
        XCTAssertEqual(stats.summary(), .empty)
        XCTAssertTrue(stats.percentileCurve().isEmpty)
    }

    func testPercentilesOfAUniformRunAreWithinThreeDigits() {
        var stats = LatencyStats()
        // 1 ms, 2 ms, ..., 1000 ms.
        for i in 1...1000 { stats.record(ns: UInt64(i) * 1_000_000) }
        XCTAssertEqual(stats.count, 1000)
        let summary = stats.summary()
        XCTAssertEqual(summary.count, 1000)
        assertClose(summary.p50, 500_000_000)
        assertClose(summary.p90, 900_000_000)
        assertClose(summary.p99, 990_000_000)
        assertClose(summary.p99_9, 999_000_000)
        XCTAssertEqual(summary.max, 1_000_000_000, "max is the recorded value itself")
        XCTAssertEqual(stats.percentile(100), 1_000_000_000)
        XCTAssertEqual(stats.percentile(250), 1_000_000_000, "clamped to 100")
    }

    func testValuesAboveSixtySecondsAreClampedNotDropped() {
        var stats = LatencyStats()
        stats.record(ns: 120_000_000_000)
        stats.record(ns: .max)
        XCTAssertEqual(stats.count, 2)
        XCTAssertEqual(stats.max, LatencyStats.highestNs)
    }

    func testSubMicrosecondValuesAreCounted() {
        var stats = LatencyStats()
        stats.record(ns: 0)
        stats.record(ns: 300)
        XCTAssertEqual(stats.count, 2)
        XCTAssertLessThan(stats.percentile(100), 1_000)
    }

    func testMergeAddsSamplesAndKeepsTheTail() {
        var a = LatencyStats()
        var b = LatencyStats()
        for _ in 0..<99 { a.record(ns: 1_000_000) }
        b.record(ns: 50_000_000)
        a.merge(b)
        XCTAssertEqual(a.count, 100)
        assertClose(a.percentile(50), 1_000_000)
        XCTAssertEqual(a.max, 50_000_000)
        assertClose(a.percentile(99.5), 50_000_000)
    }

    func testResetForgetsEverything() {
        var stats = LatencyStats()
        stats.record(ns: 5_000)
        stats.reset()
        XCTAssertEqual(stats.count, 0)
        XCTAssertEqual(stats.max, 0)
        stats.record(ns: 7_000)
        assertClose(stats.percentile(50), 7_000)
    }

    func testPercentileCurveIsLogSpacedMonotonicAndEndsAtTheMax() {
        var stats = LatencyStats()
        for i in 1...100_000 { stats.record(ns: UInt64(i) * 1_000) }
        let curve = stats.percentileCurve()
        XCTAssertEqual(curve.count, 27)
        XCTAssertEqual(curve.first?.percentile, 0)
        XCTAssertEqual(curve[5].percentile, 90, accuracy: 1e-9)
        XCTAssertEqual(curve[10].percentile, 99, accuracy: 1e-9)
        XCTAssertEqual(curve[15].percentile, 99.9, accuracy: 1e-9)
        XCTAssertEqual(curve[25].percentile, 99.999, accuracy: 1e-9)
        XCTAssertEqual(curve.last?.percentile, 100)
        XCTAssertEqual(curve.last?.ns, 100_000_000)
        for (a, b) in zip(curve, curve.dropFirst()) {
            XCTAssertLessThan(a.percentile, b.percentile)
            XCTAssertLessThanOrEqual(a.ns, b.ns)
        }
    }

    func testIntervalLatencyTakesTheP99AndStartsOver() {
        var interval = IntervalLatency()
        XCTAssertNil(interval.takeP99())
        for _ in 0..<98 { interval.record(ns: 1_000_000) }
        interval.record(ns: 9_000_000)
        interval.record(ns: 9_000_000)
        XCTAssertEqual(interval.count, 100)
        let p99 = interval.takeP99()
        XCTAssertNotNil(p99)
        assertClose(p99 ?? 0, 9_000_000)
        XCTAssertEqual(interval.count, 0)
        XCTAssertNil(interval.takeP99(), "the next second starts empty")
    }

    /// Within HdrHistogram's 3-significant-digit precision (0.1 %, plus a unit).
    private func assertClose(_ actual: UInt64, _ expected: UInt64, file: StaticString = #filePath, line: UInt = #line) {
        let tolerance = Double(expected) * 0.001 + 512
        XCTAssertEqual(Double(actual), Double(expected), accuracy: tolerance, file: file, line: line)
    }
}
