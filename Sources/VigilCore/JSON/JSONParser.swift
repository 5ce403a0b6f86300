/// The entry points of the strict RFC 8259 parser.
///
/// Accepts exactly one value with optional surrounding whitespace (space, tab, LF, CR) and nothing
/// else: no byte order mark, comments, trailing commas, single quotes, NaN/Infinity, leading zeros
/// ("01"), "+1", ".5" or "1."; no unescaped control characters (< 0x20) in strings. Escapes are
/// \" \\ \/ \b \f \n \r \t and \uXXXX, with surrogate pairs combined and lone surrogates rejected.
/// The input must be valid UTF-8 (checked here, not assumed). Duplicate object keys are rejected.
/// Containers nested deeper than `maxDepth` are rejected; the parser does not recurse, so no input
/// can exhaust the stack whatever `maxDepth` is. Numbers are correctly rounded to Double; numbers
/// whose magnitude overflows Double ("1e400") are rejected, ones that underflow become 0.
///
/// Client messages are hostile input: every path is bounded in time by the input length (object
/// key lookups switch to hashing for big objects so duplicate detection stays linear).
public enum JSONParser {
    /// Parses one JSON text. `maxDepth` is the number of containers that may be open at once:
    /// with 2, `[[1]]` passes and `[[[1]]]` fails; with 0 only scalars pass.
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = 32) throws(JSONError) -> JSONValue {
        var reader = JSONReader(bytes.assumingMemoryBound(to: UInt8.self), maxDepth: maxDepth)
        return try reader.parseDocument()
    }

    /// Parses one JSON text held in an array.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 32) throws(JSONError) -> JSONValue {
        // Array.withUnsafeBytes only rethrows `any Error`, so the typed error travels out in a Result.
        let result = bytes.withUnsafeBytes { raw -> Result<JSONValue, JSONError> in
            do throws(JSONError) {
                return .success(try parse(raw, maxDepth: maxDepth))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
