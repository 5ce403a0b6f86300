import XCTest
import VigilCore
@testable import VigilLoad

final class LoadReportTests: XCTestCase {
    func sampleReport() -> LoadReport {
        var errors = CheckErrors(limit: 2)
        errors.record("subscriber 17 epoch 3: pin X: lost updated v5 (update inside the area)")
        errors.record("second")
        errors.record("third")
        return LoadReport(
            scenario: "map-fanout",
            parameters: [(key: "subscribers", value: "1000"), (key: "publishers", value: "20"), (key: "seed", value: "7")],
            durationSeconds: 10,
            connectionsOpened: 1020, connectionsFailed: 2, sent: 20_000, delivered: 2_000_000,
            latencies: [(name: "map event", summary: LatencySummary(count: 2_000_000, p50: 412_000, p90: 873_000,
                                                                     p99: 1_234_000, p99_9: 3_456_000, max: 12_345_678))],
            checks: [CheckSummary(name: "map viewport", checked: 50, errors: errors, counters: [("events", 1000), ("lost", 3)]),
                     CheckSummary(name: "panic seq", checked: 200, errors: CheckErrors())],
            serverBefore: ProcSample(cpuSeconds: 1.25, rssKiB: 10240, peakRSSKiB: 12288, openFDs: 10, threads: 3),
            serverAfter: ProcSample(cpuSeconds: 6.25, rssKiB: 51200, peakRSSKiB: 61440, openFDs: 1030, threads: 3),
            clientCPUSeconds: 8)
    }

    func testDerivedFigures() {
        let report = sampleReport()
        XCTAssertEqual(report.sentPerSecond, 2000)
        XCTAssertEqual(report.deliveredPerSecond, 200_000)
        XCTAssertEqual(report.serverCPUSeconds, 5)
        XCTAssertEqual(report.serverCPUPercent, 50)
        XCTAssertEqual(report.clientCPUPercent, 80)
        XCTAssertEqual(report.errorCount, 3)
        let empty = LoadReport(scenario: "x", durationSeconds: 0)
        XCTAssertEqual(empty.sentPerSecond, 0)
        XCTAssertNil(empty.serverCPUPercent)
        XCTAssertNil(empty.clientCPUPercent)
    }

    func testTableShowsEverySection() {
        let table = sampleReport().renderTable()
        let lines = table.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "scenario        map-fanout")
        XCTAssertTrue(lines.contains("parameters      subscribers=1000  publishers=20  seed=7"))
        XCTAssertTrue(lines.contains("duration        10.000 s"))
        XCTAssertTrue(lines.contains("connections     1020 opened, 2 failed"))
        XCTAssertTrue(lines.contains("delivered       2000000       200000.0/s"))
        XCTAssertTrue(lines.contains("latency (ms)          count        p50        p90        p99      p99.9        max"))
        XCTAssertTrue(lines.contains("map event           2000000      0.412      0.873      1.234      3.456     12.346"), table)
        XCTAssertTrue(lines.contains("map viewport           50        3   events 1000, lost 3"), table)
        XCTAssertTrue(lines.contains("  ! subscriber 17 epoch 3: pin X: lost updated v5 (update inside the area)"))
        XCTAssertTrue(lines.contains("  ! ... and 1 more"))
        XCTAssertTrue(lines.contains("panic seq             200        0"), table)
        XCTAssertTrue(lines.contains("cpu s                  1.25       6.25       5.00   (50.0% of one core)"), table)
        XCTAssertTrue(lines.contains("rss MiB                10.0       50.0      +40.0"), table)
        XCTAssertTrue(lines.contains("open fds                 10       1030      +1020"), table)
        XCTAssertTrue(lines.contains("client cpu      80.0% of one core, 8.00 s"), table)
        // Fixed width: the latency header and row line up.
        let header = lines.first { $0.hasPrefix("latency") } ?? ""
        let row = lines.first { $0.hasPrefix("map event") } ?? ""
        XCTAssertEqual(header.count, row.count)
    }

    func testLongFigureNamesWidenTheNameColumnForEveryRowAboveTheLatencies() {
        var report = sampleReport()
        report.figures = [(key: "server CPU µs per re-subscribe", value: 226.25), (key: "fan-out ratio", value: 7)]
        let lines = report.renderTable().split(separator: "\n").map(String.init)
        // 30 characters and two spaces: every value of the section starts in column 32.
        XCTAssertTrue(lines.contains("server CPU µs per re-subscribe  226.250"), lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains("fan-out ratio" + String(repeating: " ", count: 19) + "7.000"))
        XCTAssertEqual(lines.first, "scenario" + String(repeating: " ", count: 24) + "map-fanout")
        XCTAssertTrue(lines.contains("client cpu" + String(repeating: " ", count: 22) + "80.0% of one core, 8.00 s"))
        // The other sections keep their own columns.
        XCTAssertTrue(lines.contains("map event           2000000      0.412      0.873      1.234      3.456     12.346"))
        XCTAssertTrue(lines.contains("cpu s                  1.25       6.25       5.00   (50.0% of one core)"))
    }

    func testJSONIsValidOrderedAndNumeric() throws {
        var report = sampleReport()
        report.figures = [(key: "RSS/conn KiB", value: 0.5), (key: "connections held", value: 1000)]
        let text = report.renderJSON()
        let value = try JSONParser.parse(Array(text.utf8))
        let root = try XCTUnwrap(value.object)
        XCTAssertEqual(root.keys, ["scenario", "parameters", "duration_s", "connections", "messages", "nodes", "figures",
                                   "latency_ns", "checks", "server", "client"])
        XCTAssertEqual(root["figures"]?.object?.keys, ["RSS/conn KiB", "connections held"])
        XCTAssertEqual(root["figures"]?.object?["RSS/conn KiB"]?.double, 0.5)
        XCTAssertEqual(root["parameters"]?.object?.keys, ["subscribers", "publishers", "seed"])
        XCTAssertEqual(root["parameters"]?.object?["seed"]?.string, "7")
        XCTAssertEqual(root["duration_s"]?.double, 10)
        XCTAssertEqual(root["messages"]?.object?["delivered_per_s"]?.double, 200_000)
        let latency = try XCTUnwrap(root["latency_ns"]?.object?["map event"]?.object)
        XCTAssertEqual(latency.keys, ["count", "p50", "p90", "p99", "p99_9", "max"])
        XCTAssertEqual(latency["p99"]?.int64, 1_234_000)
        let checks = try XCTUnwrap(root["checks"]?.array)
        XCTAssertEqual(checks.count, 2)
        XCTAssertEqual(checks[0].object?["errors"]?.int64, 3)
        XCTAssertEqual(checks[0].object?["first_errors"]?.array?.count, 2)
        XCTAssertEqual(checks[0].object?["counters"]?.object?["lost"]?.int64, 3)
        let server = try XCTUnwrap(root["server"]?.object)
        XCTAssertEqual(server["cpu_percent"]?.double, 50)
        XCTAssertEqual(server["after"]?.object?["open_fds"]?.int64, 1030)
        XCTAssertEqual(root["client"]?.object?["cpu_percent"]?.double, 80)
        XCTAssertEqual(text, report.renderJSON(), "stable output")
    }

    func testNodesAreListedWithTheirConnectionsAndDeliveries() throws {
        var report = sampleReport()
        XCTAssertFalse(report.renderTable().contains("node 0"), "one node: no node rows")
        report.nodes = [.init(url: "ws://127.0.0.1:8080/v1", connections: 510, delivered: 1_200_000),
                        .init(url: "ws://127.0.0.2:8080/v1", connections: 510, delivered: 800_000)]
        let lines = report.renderTable().split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("node 0          ws://127.0.0.1:8080/v1  510 connections, 1200000 delivered, 120000.0/s"), "\(lines)")
        XCTAssertTrue(lines.contains("node 1          ws://127.0.0.2:8080/v1  510 connections, 800000 delivered, 80000.0/s"), "\(lines)")
        let root = try XCTUnwrap(JSONParser.parse(Array(report.renderJSON().utf8)).object)
        let nodes = try XCTUnwrap(root["nodes"]?.array)
        XCTAssertEqual(nodes.count, 2)
        XCTAssertEqual(nodes[1].object?.keys, ["url", "connections", "delivered", "delivered_per_s"])
        XCTAssertEqual(nodes[1].object?["url"]?.string, "ws://127.0.0.2:8080/v1")
        XCTAssertEqual(nodes[1].object?["connections"]?.int64, 510)
        XCTAssertEqual(nodes[1].object?["delivered_per_s"]?.double, 80_000)
    }

    func testJSONWithoutProcessFiguresHasNulls() throws {
        let report = LoadReport(scenario: "panic \"storm\"", durationSeconds: 1)
        let root = try XCTUnwrap(JSONParser.parse(Array(report.renderJSON().utf8)).object)
        XCTAssertEqual(root["scenario"]?.string, "panic \"storm\"")
        XCTAssertEqual(root["server"], .null)
        XCTAssertEqual(root["client"], .null)
        XCTAssertEqual(root["checks"]?.array, [])
        XCTAssertFalse(report.renderTable().contains("server"))
    }
}
