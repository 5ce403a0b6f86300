#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small self-contained SVG of latency by percentile, one line per series, in the style of
/// HdrHistogram's plots: the x axis is log10(1 / (1 - p)), so 90 %, 99 %, 99.9 % ... are evenly
/// spaced and the tail gets as much room as the median; the y axis is linear in milliseconds
/// from zero, so a reader compares heights honestly. Points at 100 % (the maximum) are drawn at
/// the right edge (99.999 %).
public enum LatencyPlot {
    static let width = 720.0
    static let height = 420.0
    static let left = 70.0
    static let right = 180.0
    static let top = 40.0
    static let bottom = 50.0
    /// Decades of 1/(1-p) on the x axis: 0 % .. 99.999 %.
    static let decades = 5.0
    static let colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

    public static func svg(curves: [(name: String, points: [(percentile: Double, ns: UInt64)])],
                           title: String = "Latency by percentile") -> String {
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let maxMs = curves.flatMap { $0.points.map { Double($0.ns) / 1_000_000 } }.max() ?? 0
        let (yTop, yStep) = niceScale(maxMs)

        func x(_ percentile: Double) -> Double {
            left + xPosition(percentile) / decades * plotWidth
        }
        func y(_ ms: Double) -> Double {
            top + plotHeight - ms / yTop * plotHeight
        }

        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
        out += "viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"sans-serif\" font-size=\"12\">\n"
        out += "<rect x=\"0\" y=\"0\" width=\"\(Int(width))\" height=\"\(Int(height))\" fill=\"white\"/>\n"
        out += "<text x=\"\(n(width / 2))\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">\(escape(title))</text>\n"

        // Grid and axis labels.
        let xLabels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        for (decade, label) in xLabels.enumerated() {
            let px = left + Double(decade) / decades * plotWidth
            out += "<line x1=\"\(n(px))\" y1=\"\(n(top))\" x2=\"\(n(px))\" y2=\"\(n(top + plotHeight))\" stroke=\"#ddd\"/>\n"
            out += "<text x=\"\(n(px))\" y=\"\(n(top + plotHeight + 18))\" text-anchor=\"middle\">\(label)</text>\n"
        }
        let decimals = Swift.max(0, Int(-log10(yStep).rounded(.down)))
        var tick = 0.0
        while tick <= yTop + yStep / 2 {
            let py = y(tick)
            out += "<line x1=\"\(n(left))\" y1=\"\(n(py))\" x2=\"\(n(left + plotWidth))\" y2=\"\(n(py))\" stroke=\"#ddd\"/>\n"
            out += "<text x=\"\(n(left - 8))\" y=\"\(n(py + 4))\" text-anchor=\"end\">\(TextFormat.fixed(tick, decimals))</text>\n"
            tick += yStep
        }
        out += "<rect x=\"\(n(left))\" y=\"\(n(top))\" width=\"\(n(plotWidth))\" height=\"\(n(plotHeight))\" fill=\"none\" stroke=\"#444\"/>\n"
        out += "<text x=\"\(n(left + plotWidth / 2))\" y=\"\(n(height - 10))\" text-anchor=\"middle\">percentile</text>\n"
        out += "<text x=\"16\" y=\"\(n(top + plotHeight / 2))\" text-anchor=\"middle\" "
        out += "transform=\"rotate(-90 16 \(n(top + plotHeight / 2)))\">latency (ms)</text>\n"

        // One polyline per series, and its legend entry.
        for (index, curve) in curves.enumerated() {
            let color = colors[index % colors.count]
            let points = curve.points.map { "\(n(x($0.percentile))),\(n(y(Double($0.ns) / 1_000_000)))" }
            if !points.isEmpty {
                out += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(points.joined(separator: " "))\"/>\n"
            }
            let ly = top + 10 + Double(index) * 20
            let lx = left + plotWidth + 14
            out += "<line x1=\"\(n(lx))\" y1=\"\(n(ly))\" x2=\"\(n(lx + 20))\" y2=\"\(n(ly))\" stroke=\"\(color)\" stroke-width=\"2\"/>\n"
            out += "<text x=\"\(n(lx + 26))\" y=\"\(n(ly + 4))\">\(escape(curve.name))</text>\n"
        }
        out += "</svg>\n"
        return out
    }

    /// log10(1 / (1 - p)) for p in percent, clamped to the axis: 0 for p <= 0, `decades` for
    /// p >= 99.999 (and for 100, where it is infinite).
    static func xPosition(_ percentile: Double) -> Double {
        guard percentile.isFinite, percentile > 0 else { return 0 }
        let remaining = 1 - percentile / 100
        guard remaining > 0 else { return decades }
        return Swift.min(decades, Swift.max(0, -log10(remaining)))
    }

    /// A y axis top and tick step of 1, 2 or 5 times a power of ten, with at most about five
    /// ticks, covering `maxValue` (1 ms for an empty plot).
    static func niceScale(_ maxValue: Double) -> (top: Double, step: Double) {
        guard maxValue.isFinite, maxValue > 0 else { return (1, 0.2) }
        let raw = maxValue / 5
        let magnitude = pow(10, log10(raw).rounded(.down))
        let normalized = raw / magnitude
        let step = (normalized <= 1 ? 1 : normalized <= 2 ? 2 : normalized <= 5 ? 5 : 10) * magnitude
        return ((maxValue / step).rounded(.up) * step, step)
    }

    /// A coordinate with one decimal.
    private static func n(_ value: Double) -> String {
        TextFormat.fixed(value, 1)
    }

    /// Text content and attribute values escaped for XML.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for ch in text.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default:
                // Control characters other than tab/newline are not allowed in XML 1.0 at all.
                if ch.value < 0x20 && ch != "\t" && ch != "\n" { out += "?" } else { out.unicodeScalars.append(ch) }
            }
        }
        return out
    }
}
