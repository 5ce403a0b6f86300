/// The client side of the NATS protocol, incremental: bytes go in as they arrive (`append`, split
/// at any byte boundary), whole server operations come out (`next`).
///
/// The operations (docs.nats.io, "Client protocol"): a control line ended by CRLF, fields
/// separated by spaces or tabs, the operation name case-insensitive; MSG and HMSG announce a
/// payload of a given size that follows the line and is itself followed by CRLF.
///
/// Every byte is hostile, so everything is bounded: a control line by `maxControlLine` (an INFO
/// line, which lists a cluster's URLs, by `maxInfoLine`), a payload by `maxPayload` (the server's
/// own `max_payload`, which the connection sets from INFO, capped by the client's configuration).
/// The buffer therefore never holds more than one read plus one incomplete operation. Once an
/// error is reported the parser stays failed: the connection is closed and the next starts clean.
public struct NATSParser {
    public static let defaultMaxControlLine = 4096
    public static let defaultMaxInfoLine = 65_536

    public let maxControlLine: Int
    public let maxInfoLine: Int
    /// The largest payload (headers included) accepted in a MSG or HMSG.
    public var maxPayload: Int
    /// The most any INFO may raise `maxPayload` to (what the connection is willing to buffer).
    public let payloadCap: Int

    private var buffer: [UInt8] = []
    /// Where the unconsumed bytes start in `buffer`.
    private var start = 0
    /// How far past `start` a CRLF has already been looked for (byte-at-a-time input stays linear).
    private var scanned = 0
    /// A MSG/HMSG whose control line is parsed and whose payload has not fully arrived.
    private var pending: PendingMessage?
    private var failure: NATSProtocolError?

    private struct PendingMessage {
        var subject: String
        var sid: UInt64
        var replyTo: String?
        var headerBytes: Int?
        var totalBytes: Int
    }

    public init(maxControlLine: Int = defaultMaxControlLine, maxInfoLine: Int = defaultMaxInfoLine,
                maxPayload: Int = 1_048_576, payloadCap: Int = 8 * 1_048_576) {
        self.maxControlLine = maxControlLine
        self.maxInfoLine = max(maxInfoLine, maxControlLine)
        self.maxPayload = min(maxPayload, payloadCap)
        self.payloadCap = payloadCap
    }

    /// Bytes received and not yet returned as operations.
    public var bufferedBytes: Int { buffer.count - start }

    /// Adds bytes as they were read.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard failure == nil else { return }
        compact()
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next complete operation, nil when more bytes are needed. Throws the same error for
    /// ever once the input broke the protocol.
    public mutating func next() throws(NATSProtocolError) -> NATSServerOp? {
        if let failure { throw failure }
        do {
            return try step()
        } catch {
            failure = error
            buffer = []
            start = 0
            throw error
        }
    }

    private mutating func step() throws(NATSProtocolError) -> NATSServerOp? {
        if let message = pending {
            let need = message.totalBytes + 2
            guard buffer.count - start >= need else { return nil }
            let body = start..<(start + message.totalBytes)
            guard buffer[body.upperBound] == NATSHeaders.cr, buffer[body.upperBound + 1] == NATSHeaders.lf else {
                throw .missingPayloadTerminator
            }
            var headers: NATSHeaders?
            var payloadStart = body.lowerBound
            if let headerBytes = message.headerBytes {
                headers = try NATSHeaders.decode(buffer[body.lowerBound..<(body.lowerBound + headerBytes)])
                payloadStart += headerBytes
            }
            let payload = Array(buffer[payloadStart..<body.upperBound])
            start += need
            pending = nil
            return .message(NATSMessage(subject: message.subject, sid: message.sid, replyTo: message.replyTo,
                                        headers: headers, payload: payload))
        }
        let limit = looksLikeInfo() ? maxInfoLine : maxControlLine
        guard let lineEnd = try findLineEnd(limit: limit) else { return nil }
        let line = buffer[start..<lineEnd]
        start = lineEnd + 2
        scanned = 0
        return try parseLine(line)
    }

    /// The index of the CR of the first CRLF after `start`; nil while more bytes are needed.
    /// Only the first `limit + 2` bytes of a line are ever looked at, so the verdict (a line, too
    /// long, a bare LF) is the same however the bytes were split.
    private mutating func findLineEnd(limit: Int) throws(NATSProtocolError) -> Int? {
        let end = min(buffer.count, start + limit + 2)
        var i = start + scanned
        while i < end {
            if buffer[i] == NATSHeaders.lf {
                guard i > start, buffer[i - 1] == NATSHeaders.cr else {
                    throw .malformed(operation: "line", reason: "LF without CR")
                }
                if i - 1 - start > limit { throw .controlLineTooLong(limit: limit) }
                return i - 1
            }
            i += 1
        }
        if end - start >= limit + 2 { throw .controlLineTooLong(limit: limit) }
        scanned = max(0, end - start - 1)  // the last byte may be a CR whose LF is coming
        return nil
    }

    private func looksLikeInfo() -> Bool {
        let head = buffer[start..<min(buffer.count, start + 4)]
        return head.count == 4 && zip(head, "INFO".utf8).allSatisfy { $0 & 0xDF == $1 }
    }

    private mutating func compact() {
        if start > 0 && (start == buffer.count || start >= 4096 && start * 2 >= buffer.count) {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }

    // MARK: control lines

    private mutating func parseLine(_ line: ArraySlice<UInt8>) throws(NATSProtocolError) -> NATSServerOp? {
        if line.contains(NATSHeaders.lf) || line.contains(NATSHeaders.cr) {
            throw .malformed(operation: "line", reason: "bare CR or LF inside a control line")
        }
        let nameEnd = line.firstIndex { $0 == 0x20 || $0 == 0x09 } ?? line.endIndex
        let name = String(decoding: line[line.startIndex..<nameEnd].map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
        let rest = line[nameEnd...]
        switch name {
        case "MSG": return try parseMessage(rest, withHeaders: false)
        case "HMSG": return try parseMessage(rest, withHeaders: true)
        case "PING": return .ping
        case "PONG": return .pong
        case "+OK": return .ok
        case "-ERR": return .error(Self.errorText(rest))
        case "INFO":
            let json = rest.drop { $0 == 0x20 || $0 == 0x09 }
            let info = try NATSServerInfo.decode(json, payloadCap: payloadCap)
            maxPayload = info.maxPayload
            return .info(info)
        default:
            throw .unknownOperation(NATSProtocolError.excerpt(line))
        }
    }

    /// `MSG <subject> <sid> [reply-to] <#bytes>` or
    /// `HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>`.
    private mutating func parseMessage(_ rest: ArraySlice<UInt8>, withHeaders: Bool) throws(NATSProtocolError) -> NATSServerOp? {
        let op = withHeaders ? "HMSG" : "MSG"
        let fields = rest.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
        let sizes = withHeaders ? 2 : 1
        guard fields.count == 2 + sizes || fields.count == 3 + sizes else {
            throw .malformed(operation: op, reason: "\(fields.count) arguments")
        }
        let subject = try Self.subject(fields[0], op: op)
        guard let sid = Self.number(fields[1], maxDigits: 19) else { throw .malformed(operation: op, reason: "sid is not a number") }
        let replyTo = fields.count == 3 + sizes ? try Self.subject(fields[2], op: op) : nil
        guard let total = Self.number(fields[fields.count - 1], maxDigits: 10) else {
            throw .malformed(operation: op, reason: "size is not a number")
        }
        guard total <= UInt64(maxPayload) else { throw .payloadTooLarge(size: Int(total), limit: maxPayload) }
        var headerBytes: Int?
        if withHeaders {
            guard let h = Self.number(fields[fields.count - 2], maxDigits: 10), h <= total else {
                throw .malformed(operation: op, reason: "header size is not a number within the total size")
            }
            guard h >= 12 else { throw .malformed(operation: op, reason: "header size \(h) too small for NATS/1.0 and CRLFs") }
            headerBytes = Int(h)
        }
        pending = PendingMessage(subject: subject, sid: sid, replyTo: replyTo, headerBytes: headerBytes, totalBytes: Int(total))
        return try step()
    }

    private static func subject(_ bytes: ArraySlice<UInt8>, op: String) throws(NATSProtocolError) -> String {
        guard bytes.count <= NATSSubject.maxLength * 2, let text = String(validating: bytes, as: UTF8.self),
              bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw .malformed(operation: op, reason: "subject is not printable UTF-8 within \(NATSSubject.maxLength * 2) bytes")
        }
        return text
    }

    /// A decimal number of at most `maxDigits` digits; nil past `UInt64.max` (20 digits can be
    /// more than it: the fuzzer found a reply subject with 21700000000000000000).
    static func number(_ bytes: ArraySlice<UInt8>, maxDigits: Int) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= maxDigits else { return nil }
        var value: UInt64 = 0
        for b in bytes {
            guard b >= 0x30 && b <= 0x39 else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(b - 0x30))
            guard !o1 && !o2 else { return nil }
            value = sum
        }
        return value
    }

    /// `-ERR 'Authorization Violation'` → `Authorization Violation`, printable ASCII only, 200 bytes at most.
    private static func errorText(_ rest: ArraySlice<UInt8>) -> String {
        var text = rest.drop { $0 == 0x20 || $0 == 0x09 }
        if text.first == UInt8(ascii: "'") { text = text.dropFirst() }
        if text.last == UInt8(ascii: "'") { text = text.dropLast() }
        return String(decoding: text.prefix(200).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}
