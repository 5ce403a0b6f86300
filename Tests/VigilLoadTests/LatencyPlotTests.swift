import XCTest
import FoundationXML
@testable import VigilLoad

final class LatencyPlotTests: XCTestCase {
    /// Collects element names, so the test can tell the SVG parsed and holds what it should.
    final class Collector: NSObject, XMLParserDelegate {
        var elements: [String] = []
        var texts: [String] = []
        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            elements.append(name)
        }
        func parser(_ parser: XMLParser, foundCharacters string: String) {
            texts.append(string)
        }
    }

    func parse(_ svg: String) -> (ok: Bool, collector: Collector) {
        let parser = XMLParser(data: Data(svg.utf8))
        let collector = Collector()
        parser.delegate = collector
        return (parser.parse(), collector)
    }

    func testThePlotIsWellFormedSVGWithOneLinePerSeries() {
        var a = LatencyStats()
        var b = LatencyStats()
        for i in 1...10_000 {
            a.record(ns: UInt64(i) * 100)
            b.record(ns: UInt64(i) * 300)
        }
        let svg = LatencyPlot.svg(curves: [(name: "map event", points: a.percentileCurve()),
                                           (name: "panic <location> & \"status\"", points: b.percentileCurve())])
        let (ok, collector) = parse(svg)
        XCTAssertTrue(ok, svg)
        XCTAssertEqual(collector.elements.first, "svg")
        XCTAssertEqual(collector.elements.filter { $0 == "polyline" }.count, 2)
        let text = collector.texts.joined()
        XCTAssertTrue(text.contains("panic <location> & \"status\""), "names come back unescaped")
        for label in ["90%", "99%", "99.9%", "99.99%"] { XCTAssertTrue(text.contains(label), label) }
        XCTAssertTrue(text.contains("latency (ms)"))
    }

    func testAnEmptyPlotIsStillValid() {
        let (ok, collector) = parse(LatencyPlot.svg(curves: []))
        XCTAssertTrue(ok)
        XCTAssertEqual(collector.elements.filter { $0 == "polyline" }.count, 0)
    }

    func testTheXAxisIsLogOfOneOverOneMinusP() {
        XCTAssertEqual(LatencyPlot.xPosition(0), 0)
        XCTAssertEqual(LatencyPlot.xPosition(90), 1, accuracy: 1e-9)
        XCTAssertEqual(LatencyPlot.xPosition(99), 2, accuracy: 1e-9)
        XCTAssertEqual(LatencyPlot.xPosition(99.99), 4, accuracy: 1e-9)
        XCTAssertEqual(LatencyPlot.xPosition(100), LatencyPlot.decades)
        XCTAssertEqual(LatencyPlot.xPosition(-5), 0)
        XCTAssertEqual(LatencyPlot.xPosition(.nan), 0)
    }

    func testTheYAxisUsesNiceSteps() {
        XCTAssertEqual(LatencyPlot.niceScale(0).top, 1)
        let s = LatencyPlot.niceScale(12.3)
        XCTAssertEqual(s.step, 5)
        XCTAssertEqual(s.top, 15)
        let small = LatencyPlot.niceScale(0.42)
        XCTAssertEqual(small.step, 0.1, accuracy: 1e-12)
        XCTAssertEqual(small.top, 0.5, accuracy: 1e-12)
        XCTAssertGreaterThanOrEqual(LatencyPlot.niceScale(987).top, 987)
    }

    func testEscapingCoversXMLSpecials() {
        XCTAssertEqual(LatencyPlot.escape("a<b>&\"c'\u{1}"), "a&lt;b&gt;&amp;&quot;c&apos;?")
    }
}
