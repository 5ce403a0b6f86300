// libFuzzer body for the JSON codec (Sources/VigilCore/JSON). Compiled together with those
// sources, so no import; the driver's LLVMFuzzerTestOneInput calls it (no @_cdecl here).
// Property: parsing never crashes; whatever parses writes back out to text that parses to an
// identical value (numbers bit for bit) and writes back to the same bytes.

public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    // A small limit so the recursive walks below (==, the writer) stay shallow.
    guard let value = try? JSONParser.parse(input, maxDepth: 16) else { return }
    var writer = JSONWriter()
    writer.value(value)
    let reparsed: JSONValue
    do {
        reparsed = try JSONParser.parse(writer.bytes, maxDepth: 16)
    } catch {
        preconditionFailure("writer output rejected: \(error)")
    }
    precondition(fuzzJSONIdentical(value, reparsed), "round trip changed the value")
    var again = JSONWriter()
    again.value(reparsed)
    precondition(again.bytes == writer.bytes, "writing is not stable")
}

/// Equality with numbers compared bit for bit, so -0 and 0 (equal as Doubles) count as different.
func fuzzJSONIdentical(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.number(let x), .number(let y)):
        return x.bitPattern == y.bitPattern
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { fuzzJSONIdentical($0, $1) }
    case (.object(let x), .object(let y)):
        return x.members.count == y.members.count
            && zip(x.members, y.members).allSatisfy { $0.key == $1.key && fuzzJSONIdentical($0.value, $1.value) }
    default:
        return a == b
    }
}
