/// Splits an incoming HTTP head into lines across arbitrary chunk boundaries,
/// enforcing the head size limit as bytes arrive (RFC 9112 §2.2).
///
/// Each byte is scanned once: only the current, incomplete line is buffered, so a
/// feed never rescans earlier input. Lines end at LF; a CR directly before the LF
/// is dropped, a CR anywhere else ("bare CR") is an error. Bare LF is accepted,
/// as §2.2 allows.
struct HTTPLineReader {
    /// Outcome of one `nextLine` call.
    enum Step {
        /// A complete line (without its CRLF/LF) is in `line`, valid until the next call.
        case line
        /// The chunk is used up without completing a line.
        case needMore
        /// The head cannot end within `maxBytes`.
        case tooLong
        /// A CR not followed by LF.
        case bareCR
    }

    let maxBytes: Int
    /// Bytes of the head consumed so far, line terminators included.
    private(set) var total = 0
    /// The line being assembled; complete after a `.line` step.
    private(set) var line: [UInt8] = []
    private var lineComplete = false
    /// The last byte of the previous chunk was a CR still waiting for its LF.
    private var pendingCR = false

    init(maxBytes: Int) {
        self.maxBytes = max(0, maxBytes)
    }

    mutating func nextLine(_ bytes: UnsafeRawBufferPointer, index: inout Int) -> Step {
        if lineComplete {
            line.removeAll(keepingCapacity: true)
            lineComplete = false
        }
        let start = index
        // Bytes past the limit are not looked at, so that the first problem in byte order is the
        // one reported however the input is split (a bare CR beyond the limit is "too long" whole
        // or in pieces; it was a bare CR when it arrived in the same chunk as the limit's edge).
        let end = min(bytes.count, start + (maxBytes - total))
        var i = start
        var crAt = -1
        while i < end {
            let b = bytes[i]
            if b == 0x0A { break }
            if b == 0x0D {
                // A second CR, or any byte after one, makes the earlier CR bare.
                if crAt >= 0 { return .bareCR }
                crAt = i
            } else if crAt >= 0 {
                return .bareCR
            }
            i += 1
        }
        let found = i < end
        let segment = i - start
        if pendingCR && segment > 0 { return .bareCR }
        let consumed = segment + (found ? 1 : 0)
        // The head must end (final LF included) within maxBytes. If this chunk
        // ends mid-line at exactly the limit, the LF still to come would pass it,
        // so fail now rather than wait.
        let newTotal = total + consumed
        if newTotal > maxBytes || (!found && newTotal >= maxBytes) { return .tooLong }
        total = newTotal
        if segment > 0 {
            line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
        }
        index = i + (found ? 1 : 0)
        if !found {
            pendingCR = crAt >= 0 || (pendingCR && segment == 0)
            return .needMore
        }
        pendingCR = false
        if line.last == 0x0D { line.removeLast() }
        lineComplete = true
        return .line
    }
}
