import XCTest
@testable import VigilLoad

final class RatePacerTests: XCTestCase {
    func testPacesAtTheRateAcrossTicks() {
        var p = RatePacer(perSecond: 100)
        XCTAssertEqual(p.due(nowNs: 1_000_000_000), 0)  // the first tick only starts the clock
        var total = 0
        for k in 1...200 { total += p.due(nowNs: 1_000_000_000 + UInt64(k) * 5_000_000) }  // one second of 5 ms ticks
        XCTAssertEqual(total, 100)
    }

    func testALongStallIsCappedAtTheBurst() {
        var p = RatePacer(perSecond: 100, burst: 20)
        _ = p.due(nowNs: 0)
        XCTAssertEqual(p.due(nowNs: 60_000_000_000), 20)
        XCTAssertEqual(p.due(nowNs: 60_000_000_000), 0)
    }

    func testRefundedCreditIsUsedNextTime() {
        var p = RatePacer(perSecond: 10, burst: 5)
        _ = p.due(nowNs: 0)
        XCTAssertEqual(p.due(nowNs: 300_000_000), 3)
        p.refund(2)
        XCTAssertEqual(p.due(nowNs: 300_000_000), 2)
    }

    func testAZeroRateNeverFires() {
        var p = RatePacer(perSecond: 0)
        _ = p.due(nowNs: 0)
        XCTAssertEqual(p.due(nowNs: 10_000_000_000), 0)
    }

    func testGuessedSecretsHaveTheServersShape() {
        var rng = SeededRandom(seed: 7)
        let id = GuessedSecret.streamID(using: &rng), token = GuessedSecret.token(using: &rng)
        XCTAssertEqual(id.utf8.count, 22)
        XCTAssertEqual(token.utf8.count, 43)
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        XCTAssertTrue((id + token).allSatisfy(allowed.contains))
        XCTAssertNotEqual(id, GuessedSecret.streamID(using: &rng))
    }
}
