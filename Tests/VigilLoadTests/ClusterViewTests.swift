import VigilCore
import XCTest
@testable import VigilLoad

final class ClusterViewTests: XCTestCase {
    private func object(_ text: String) throws -> JSONObject {
        guard case .object(let m) = try JSONParser.parse(Array(text.utf8)) else {
            XCTFail("not an object: \(text)")
            return JSONObject([])
        }
        return m
    }

    private let reply = #"{"type":"ok","ref":3,"precision":3,"clusters":[{"cell":"u33","count":118,"by_category":{"general":58,"hazard":60},"lat":52.5093041,"lon":13.3951775},{"cell":"u0y","count":4,"by_category":{"hazard":4},"lat":48.1372155,"lon":11.5755012}]}"#
    private let changed = #"{"type":"clusters.changed","precision":3,"cells":[{"cell":"u33","count":119,"by_category":{"general":58,"hazard":61},"lat":52.5091877,"lon":13.3949624},{"cell":"u0y","count":0}]}"#
    private let fresh = #"{"type":"ok","ref":9,"precision":3,"clusters":[{"cell":"u33","count":119,"by_category":{"general":58,"hazard":61},"lat":52.5091877,"lon":13.3949624}]}"#

    func testChangesAppliedToTheReplyEqualAFreshSubscribe() throws {
        var view = try XCTUnwrap(ClusterView.reply(object(reply)))
        XCTAssertEqual(view.cells.count, 2)
        XCTAssertEqual(try view.apply(changed: object(changed)), 2)
        XCTAssertNil(view.cells["u0y"], "count 0 removes the cell")
        var checker = ClusterChecker(intervalNs: 1_000_000_000, slackNs: 20_000_000)
        checker.converged(subscriber: 1, view: view, fresh: try XCTUnwrap(ClusterView.reply(object(fresh))))
        XCTAssertEqual(checker.viewsChecked, 1)
        XCTAssertTrue(checker.convergence.isEmpty, "\(checker.convergence.first)")
    }

    func testAMissedChangeIsCaught() throws {
        // The view without the clusters.changed: a stale count and a cell that should be gone.
        let view = try XCTUnwrap(ClusterView.reply(object(reply)))
        var checker = ClusterChecker(intervalNs: 1_000_000_000, slackNs: 20_000_000)
        checker.converged(subscriber: 7, view: view, fresh: try XCTUnwrap(ClusterView.reply(object(fresh))))
        XCTAssertEqual(checker.convergence.count, 2)
        XCTAssertTrue(checker.convergence.first[0].contains("cell u0y"), checker.convergence.first[0])
        XCTAssertTrue(checker.convergence.first[1].contains("cell u33"), checker.convergence.first[1])
    }

    func testAMovedMeanIsCaught() throws {
        var view = try XCTUnwrap(ClusterView.reply(object(fresh)))
        view.cells["u33"]?.lat = 52.5
        XCTAssertEqual(view.differences(from: try XCTUnwrap(ClusterView.reply(object(fresh)))).count, 1)
    }

    func testAChangeOfAnotherPrecisionOrMalformedIsRefused() throws {
        var view = try XCTUnwrap(ClusterView.reply(object(reply)))
        XCTAssertNil(try view.apply(changed: object(#"{"type":"clusters.changed","precision":4,"cells":[]}"#)))
        XCTAssertNil(try view.apply(changed: object(#"{"type":"clusters.changed","precision":3,"cells":[{"count":1}]}"#)))
        XCTAssertNil(ClusterView.reply(try object(#"{"type":"ok","ref":1}"#)))
    }

    func testPacingFlagsGapsShorterThanTheIntervalLessTheSlack() {
        var checker = ClusterChecker(intervalNs: 1_000_000_000, slackNs: 20_000_000)
        checker.gap(subscriber: 1, ns: 1_000_000_000)
        checker.gap(subscriber: 1, ns: 985_000_000)  // within the slack
        XCTAssertTrue(checker.pacing.isEmpty)
        checker.gap(subscriber: 2, ns: 500_000_000)
        XCTAssertEqual(checker.pacing.count, 1)
        XCTAssertEqual(checker.gapsChecked, 3)
        XCTAssertEqual(checker.shortestGapNs, 500_000_000)
    }
}
