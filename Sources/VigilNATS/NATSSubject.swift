/// The rules for subjects Vigil sends (docs.nats.io, "Subject-based messaging"): tokens of
/// printable characters separated by '.', none empty, no whitespace; '*' and '>' only as whole
/// tokens, '>' only last, and wildcards only where a subscription allows them.
public enum NATSSubject {
    /// Longest subject Vigil builds or accepts from configuration (the server has no hard limit
    /// below `max_control_line`; this keeps every control line far under it).
    public static let maxLength = 512

    /// Why `subject` is not a valid subject, nil when it is.
    public static func problem(_ subject: String, wildcards: Bool) -> String? {
        if subject.isEmpty { return "empty" }
        let bytes = Array(subject.utf8)
        if bytes.count > maxLength { return "longer than \(maxLength) bytes" }
        var tokenStart = 0
        for i in 0...bytes.count {
            if i < bytes.count && bytes[i] != UInt8(ascii: ".") {
                let b = bytes[i]
                if b <= 0x20 || b == 0x7F { return "contains whitespace or a control character" }
                continue
            }
            let token = bytes[tokenStart..<i]
            if token.isEmpty { return "has an empty token" }
            let hasStar = token.contains(UInt8(ascii: "*")), hasGreater = token.contains(UInt8(ascii: ">"))
            if hasStar || hasGreater {
                if !wildcards { return "contains a wildcard" }
                if token.count != 1 { return "has a wildcard inside a token" }
                if hasGreater && i != bytes.count { return "has '>' before the last token" }
            }
            tokenStart = i + 1
        }
        return nil
    }

    /// Whether `token` may be one token of a subject (a cluster name, a node id).
    public static func isToken(_ token: String) -> Bool {
        !token.contains(".") && problem(token, wildcards: false) == nil
    }
}
