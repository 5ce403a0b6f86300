import XCTest
@testable import VigilLoad

final class OutcomeTallyTests: XCTestCase {
    func testCodesAreCountedInFirstSeenOrder() {
        var c = CodeCounts()
        c.add("rate_limited")
        c.add("forbidden")
        c.add("rate_limited", 2)
        XCTAssertEqual(c.labels, ["rate_limited", "forbidden"])
        XCTAssertEqual(c["rate_limited"], 3)
        XCTAssertEqual(c["forbidden"], 1)
        XCTAssertEqual(c["capacity_exceeded"], 0)
        XCTAssertEqual(c.total, 4)
        XCTAssertEqual(c.counters(prefix: "refused ").map(\.name), ["refused rate_limited", "refused forbidden"])
    }

    func testALabelFromTheNetworkIsBounded() {
        XCTAssertEqual(CodeCounts.label("capacity_exceeded"), "capacity_exceeded")
        XCTAssertEqual(CodeCounts.label("1013"), "1013")
        XCTAssertEqual(CodeCounts.label(""), "other")
        XCTAssertEqual(CodeCounts.label("Rate Limited"), "other")
        XCTAssertEqual(CodeCounts.label("a\u{0}b"), "other")
        XCTAssertEqual(CodeCounts.label(String(repeating: "x", count: 33)), "other")
        // A server inventing codes cannot grow the table past its limit.
        var c = CodeCounts(limit: 4)
        for i in 0..<100 { c.add("code_\(i)") }
        XCTAssertEqual(c.labels, ["code_0", "code_1", "code_2", "other"])
        XCTAssertEqual(c["other"], 97)
        XCTAssertEqual(c.total, 100)
    }

    func testTheSummaryCountsRepliesAndCloses() {
        var t = OutcomeTally(name: "panic.start")
        for _ in 0..<5 { t.requestSent() }
        t.answeredOK()
        t.refused(code: "rate_limited")
        t.refused(code: "rate_limited")
        t.closedByServer(code: 1008, outstanding: 2)
        t.closedByServer(code: nil, outstanding: 0)
        XCTAssertEqual(t.answered, 3)
        let s = t.summary()
        XCTAssertEqual(s.name, "abuse panic.start")
        XCTAssertEqual(s.checked, 5)
        XCTAssertTrue(s.errors.isEmpty)
        let counters = Dictionary(uniqueKeysWithValues: s.counters.map { ($0.name, $0.value) })
        XCTAssertEqual(counters, ["sent": 5, "ok": 1, "refused": 2, "unanswered": 2, "refused rate_limited": 2,
                                  "closed 1008": 1, "closed tcp": 1])
    }

    func testErrorsAreKeptApartFromRefusals() {
        var t = OutcomeTally(name: "pin.vote", maxErrors: 1)
        t.refused(code: "forbidden")
        t.error("reply to an unknown ref")
        t.error("another")
        XCTAssertEqual(t.summary().errors.count, 2)
        XCTAssertEqual(t.summary().errors.first, ["reply to an unknown ref"])
    }
}

final class StalledTallyTests: XCTestCase {
    func testClosesByCodeAndWhatWasReadAfterwards() {
        var t = StalledTally()
        for _ in 0..<4 { t.stoppedReading() }
        t.closedByServer(code: 1013)
        t.closedByServer(code: 1013)
        t.closedByServer(code: nil)
        t.resumedReading()
        for _ in 0..<7 { t.messageAfterResume() }
        let s = t.summary(name: "stalled subscribers", planned: 5)
        XCTAssertEqual(s.checked, 5)
        XCTAssertTrue(s.errors.isEmpty)
        let counters = Dictionary(uniqueKeysWithValues: s.counters.map { ($0.name, $0.value) })
        XCTAssertEqual(counters, ["stalled": 4, "closed by server": 3, "open at resume": 1, "messages after resume": 7,
                                  "closed 1013": 2, "closed tcp": 1])
        XCTAssertEqual(s.counters.prefix(4).map(\.name), ["stalled", "closed by server", "open at resume", "messages after resume"])
    }
}
