/// Number and column formatting for the report, the progress line and the plot, without
/// Foundation's `String(format:)` (the module stays Foundation-free like the rest of Vigil).
enum TextFormat {
    /// `value` rounded to `decimals` places: `fixed(1.23456, 3)` is "1.235". Non-finite is "-".
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "-" }
        let places = Swift.max(0, Swift.min(decimals, 9))
        var scale: Double = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = (value.magnitude * scale).rounded()
        guard scaled < 9.0e18 else { return "\(value)" }
        let units = UInt64(scaled)
        let factor = UInt64(scale)
        let whole = units / factor
        var text = (value < 0 && units != 0 ? "-" : "") + String(whole)
        if places > 0 {
            let fraction = String(units % factor)
            text += "." + String(repeating: "0", count: places - fraction.count) + fraction
        }
        return text
    }

    /// Nanoseconds as milliseconds with three decimals (microsecond resolution): "1.234".
    static func ms(_ ns: UInt64) -> String {
        fixed(Double(ns) / 1_000_000, 3)
    }

    /// KiB as MiB with one decimal.
    static func mib(_ kib: UInt64) -> String {
        fixed(Double(kib) / 1024, 1)
    }

    /// `text` padded with spaces on the left to `width` (right-aligned); longer text is kept whole.
    static func right(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    /// The width of a table's left-aligned name column: its longest name and two spaces after
    /// it, at least `minimum` (so short tables keep their usual layout). A name's width is its
    /// count of characters (as `left` pads), so "µs" is two.
    static func nameWidth(_ names: [String], minimum: Int = 16) -> Int {
        Swift.max(minimum, (names.map(\.count).max() ?? 0) + 2)
    }

    /// `text` padded on the right to `width` (left-aligned).
    static func left(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
