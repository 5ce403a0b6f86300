/// A `TextOutputStream` that appends to the writer's output, so `Double.write(to:)` can hand over the
/// shortest round-trip digits without building a String.
///
/// `Double.write(to:)` formats into a stack buffer and passes it to `_writeASCII`, an underscored
/// but public `TextOutputStream` requirement with a default. Implementing it keeps the digits
/// allocation-free; if a future standard library stops calling it, `write(_:)` still gives the
/// same bytes, through a String (small, so usually still no allocation).
struct JSONASCIISink: TextOutputStream {
    var out: JSONOutput

    mutating func write(_ string: String) {
        var string = string
        string.withUTF8 { out.append($0) }
    }

    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) {
        out.append(buffer)
    }
}
