/// Parses `Sec-WebSocket-Extensions` values into offers, pure over bytes.
///
/// Grammar (RFC 6455 §9.1, list and whitespace rules of RFC 9110 §5.6):
///
///     extension-list = 1#extension
///     extension      = token *( OWS ";" OWS extension-param )
///     extension-param = token [ OWS "=" OWS ( token / quoted-string ) ]
///
/// RFC 6455 was written against RFC 2616's implied linear whitespace, which allows
/// whitespace next to every separator, so OWS is accepted around ";", "=" and ",". Empty list
/// elements (", ,") are skipped: RFC 9110 §5.6.1 says a recipient MUST accept them. A
/// quoted-string value must unescape to a token (RFC 6455 §9.1's comment on the rule).
///
/// Cost: one pass per value, linear in its length, run once per upgrade request; the request
/// head's size limit bounds the input, so no further limit is needed here.
public enum ExtensionHeaderParser {
    /// Every offer of every header line, in order (one string per header line, as in
    /// `UpgradeRequest.extensions`). Throws on the first grammar violation.
    public static func parse(_ values: [String]) throws(ExtensionHeaderError) -> [ExtensionOffer] {
        var offers: [ExtensionOffer] = []
        for value in values {
            try parse(Array(value.utf8), into: &offers)
        }
        return offers
    }

    /// Appends the offers of one header line.
    static func parse(_ b: [UInt8], into offers: inout [ExtensionOffer]) throws(ExtensionHeaderError) {
        var i = 0
        while true {
            skipOWS(b, &i)
            guard i < b.count else { return }
            if b[i] == comma {
                i += 1 // an empty list element
                continue
            }
            guard let name = token(b, &i) else { throw error("expected an extension name", i) }
            var offer = ExtensionOffer(name: name)
            skipOWS(b, &i)
            while i < b.count && b[i] == semicolon {
                i += 1
                skipOWS(b, &i)
                guard let parameter = token(b, &i) else { throw error("expected a parameter name", i) }
                var value: String?
                skipOWS(b, &i)
                if i < b.count && b[i] == equals {
                    i += 1
                    skipOWS(b, &i)
                    value = try parameterValue(b, &i)
                    skipOWS(b, &i)
                }
                offer.parameters.append(ExtensionOffer.Parameter(name: parameter, value: value))
            }
            offers.append(offer)
            guard i < b.count else { return }
            guard b[i] == comma else { throw error("expected ',' or ';'", i) }
            i += 1
        }
    }

    /// A token, or an unescaped quoted-string that is itself a token.
    static func parameterValue(_ b: [UInt8], _ i: inout Int) throws(ExtensionHeaderError) -> String {
        guard i < b.count && b[i] == quote else {
            guard let value = token(b, &i) else { throw error("expected a parameter value", i) }
            return value
        }
        let start = i
        i += 1
        var unescaped: [UInt8] = []
        while i < b.count {
            let c = b[i]
            if c == quote {
                i += 1
                guard HTTPSyntax.isToken(unescaped) else {
                    throw error("quoted value is not a token", start)
                }
                return String(decoding: unescaped, as: UTF8.self)
            }
            if c == backslash {
                // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ), RFC 9110 §5.6.4
                guard i + 1 < b.count, isQuotedPairChar(b[i + 1]) else { throw error("bad escape in quoted value", i) }
                unescaped.append(b[i + 1])
                i += 2
                continue
            }
            guard isQDText(c) else { throw error("bad character in quoted value", i) }
            unescaped.append(c)
            i += 1
        }
        throw error("unterminated quoted value", start)
    }

    /// Reads a token (RFC 9110 §5.6.2) at `i`; nil (and `i` unmoved) when none starts there.
    static func token(_ b: [UInt8], _ i: inout Int) -> String? {
        let start = i
        while i < b.count && HTTPSyntax.isTokenChar(b[i]) {
            i += 1
        }
        return i > start ? String(decoding: b[start..<i], as: UTF8.self) : nil
    }

    static func skipOWS(_ b: [UInt8], _ i: inout Int) {
        while i < b.count && (b[i] == 0x20 || b[i] == 0x09) {
            i += 1
        }
    }

    /// qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text (RFC 9110 §5.6.4)
    static func isQDText(_ c: UInt8) -> Bool {
        c == 0x09 || c == 0x20 || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E) || c >= 0x80
    }

    static func isQuotedPairChar(_ c: UInt8) -> Bool {
        c == 0x09 || (c >= 0x20 && c <= 0x7E) || c >= 0x80
    }

    static func error(_ message: String, _ offset: Int) -> ExtensionHeaderError {
        ExtensionHeaderError(message: message, offset: offset)
    }

    static let comma = UInt8(ascii: ",")
    static let semicolon = UInt8(ascii: ";")
    static let equals = UInt8(ascii: "=")
    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")
}
