/// The client's operations as bytes, appended to a caller-owned buffer (the connection's output).
///
/// Subjects are checked before anything is appended, so a refused call leaves `out` as it was.
public enum NATSEncoder {
    /// `PUB <subject> [reply-to] <#bytes>`, or with headers
    /// `HPUB <subject> [reply-to] <#header bytes> <#total bytes>`; then the payload and CRLF.
    /// `maxPayload` is the server's (headers count toward it).
    public static func publish(subject: String, replyTo: String? = nil, headers: NATSHeaders? = nil,
                               payload: some Collection<UInt8>, maxPayload: Int,
                               into out: inout [UInt8]) throws(NATSEncodeError) {
        try check(subject, wildcards: false)
        if let replyTo { try check(replyTo, wildcards: false) }
        var headerBlock: [UInt8] = []
        if let headers { try headers.encode(into: &headerBlock) }
        let total = headerBlock.count + payload.count
        guard total <= maxPayload else { throw .payloadTooLarge(size: total, limit: maxPayload) }
        out.append(contentsOf: (headers == nil ? "PUB " : "HPUB ").utf8)
        out.append(contentsOf: subject.utf8)
        if let replyTo {
            out.append(0x20)
            out.append(contentsOf: replyTo.utf8)
        }
        if headers != nil {
            out.append(0x20)
            out.append(contentsOf: String(headerBlock.count).utf8)
        }
        out.append(0x20)
        out.append(contentsOf: String(total).utf8)
        out.append(contentsOf: crlf)
        out.append(contentsOf: headerBlock)
        out.append(contentsOf: payload)
        out.append(contentsOf: crlf)
    }

    /// `SUB <subject> [queue group] <sid>`.
    public static func subscribe(subject: String, queue: String? = nil, sid: UInt64,
                                 into out: inout [UInt8]) throws(NATSEncodeError) {
        try check(subject, wildcards: true)
        if let queue, !NATSSubject.isToken(queue) { throw .invalidSubject("queue group '\(queue.prefix(32))' is not a token") }
        out.append(contentsOf: "SUB ".utf8)
        out.append(contentsOf: subject.utf8)
        if let queue {
            out.append(0x20)
            out.append(contentsOf: queue.utf8)
        }
        out.append(0x20)
        out.append(contentsOf: String(sid).utf8)
        out.append(contentsOf: crlf)
    }

    /// `UNSUB <sid> [max_msgs]`: with `afterMessages`, the server removes the subscription once
    /// that many messages were delivered in all.
    public static func unsubscribe(sid: UInt64, afterMessages: Int? = nil, into out: inout [UInt8]) {
        out.append(contentsOf: "UNSUB ".utf8)
        out.append(contentsOf: String(sid).utf8)
        if let afterMessages {
            out.append(0x20)
            out.append(contentsOf: String(afterMessages).utf8)
        }
        out.append(contentsOf: crlf)
    }

    public static func ping(into out: inout [UInt8]) { out.append(contentsOf: "PING\r\n".utf8) }
    public static func pong(into out: inout [UInt8]) { out.append(contentsOf: "PONG\r\n".utf8) }

    private static let crlf: [UInt8] = [0x0D, 0x0A]

    private static func check(_ subject: String, wildcards: Bool) throws(NATSEncodeError) {
        if let problem = NATSSubject.problem(subject, wildcards: wildcards) {
            throw .invalidSubject("'\(subject.prefix(64))' \(problem)")
        }
    }
}
