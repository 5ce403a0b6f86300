/// Header lookups shared by `HTTPRequestHead` and `HTTPResponseHead`. Field names
/// are compared ASCII case-insensitively (RFC 9110 §5.1).
enum HTTPHeaderSearch {
    static func value(_ headers: [(name: String, value: String)], _ name: String) -> String? {
        for field in headers where equalsIgnoringCase(field.name, name) {
            return field.value
        }
        return nil
    }

    static func values(_ headers: [(name: String, value: String)], _ name: String) -> [String] {
        headers.compactMap { equalsIgnoringCase($0.name, name) ? $0.value : nil }
    }

    /// Comma-separated list elements over all occurrences (RFC 9110 §5.6.1),
    /// trimmed of OWS, empty elements dropped, case kept. Quoted strings are not
    /// special-cased: the lists Vigil reads (Connection, Upgrade, subprotocols,
    /// versions) are token lists.
    static func elements(_ headers: [(name: String, value: String)], _ name: String) -> [String] {
        var out: [String] = []
        for value in values(headers, name) {
            for part in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
                let trimmed = trimOWS(part)
                if !trimmed.isEmpty {
                    out.append(String(decoding: trimmed, as: UTF8.self))
                }
            }
        }
        return out
    }

    /// Strips SP and HTAB from both ends.
    static func trimOWS<C: BidirectionalCollection>(_ bytes: C) -> C.SubSequence where C.Element == UInt8 {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start != end && (bytes[start] == 0x20 || bytes[start] == 0x09) {
            start = bytes.index(after: start)
        }
        while start != end {
            let last = bytes.index(before: end)
            guard bytes[last] == 0x20 || bytes[last] == 0x09 else { break }
            end = last
        }
        return bytes[start..<end]
    }

    /// ASCII case-insensitive equality, no allocation.
    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        var ia = a.utf8.makeIterator()
        var ib = b.utf8.makeIterator()
        while true {
            switch (ia.next(), ib.next()) {
            case (nil, nil):
                return true
            case let (x?, y?):
                if lowerASCII(x) != lowerASCII(y) { return false }
            default:
                return false
            }
        }
    }

    @inline(__always)
    static func lowerASCII(_ c: UInt8) -> UInt8 {
        c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c | 0x20 : c
    }
}

/// A parsed HTTP head's field list, with the lookups both request and response heads offer.
public protocol HTTPHeaderFields {
    /// Fields in arrival order, names as sent, values trimmed of OWS.
    var headers: [(name: String, value: String)] { get }
}

extension HTTPHeaderFields {
    /// The first value of the named field (case-insensitive name).
    public func value(_ name: String) -> String? {
        HTTPHeaderSearch.value(headers, name)
    }

    /// Every value of the named field, in order.
    public func values(_ name: String) -> [String] {
        HTTPHeaderSearch.values(headers, name)
    }

    /// Comma-separated list elements over all occurrences, trimmed and lowercased:
    /// for case-insensitive tokens such as `Connection` and `Upgrade`.
    public func tokens(_ name: String) -> [String] {
        HTTPHeaderSearch.elements(headers, name).map { $0.lowercased() }
    }

    /// Comma-separated list elements over all occurrences, trimmed, case kept:
    /// for case-sensitive lists such as `Sec-WebSocket-Protocol`.
    public func elements(_ name: String) -> [String] {
        HTTPHeaderSearch.elements(headers, name)
    }
}
