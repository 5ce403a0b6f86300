/// Server-side negotiation of permessage-deflate (RFC 7692 §7): the client's offers and the
/// server's `DeflateSettings` in, the agreed parameters and the exact response value out.
///
/// Pure and run once per upgrade request. The rules, each with its section:
/// - Offers are walked in the client's order and the first acceptable one is accepted (§5:
///   "The order of elements is important as it specifies the client's preference ... It is
///   recommended that a server accepts PMCEs with higher preference if the server supports
///   them"); other extensions' offers are skipped.
/// - An offer is declined, and the next one tried, when it has a parameter not defined for
///   offers, a parameter twice, or a parameter with an invalid value (§7: the server "MUST
///   decline"); also when the server cannot honour it (§7, fourth condition), which here is
///   only `server_max_window_bits=8` (zlib cannot compress with a 256-byte window; §7.1.2.1:
///   "A server declines an extension negotiation offer with this parameter if the server
///   doesn't support it").
/// - `server_no_context_takeover`: in the response when offered (§7.1.1.1: that is how the
///   server accepts it) or when the settings insist (§7.1.1.1: "A server MAY include" it even
///   if the offer didn't).
/// - `client_no_context_takeover`: in the response when offered (the client hinted it will
///   not take over context anyway; answering makes it binding, so the inflater can be freed)
///   or when the settings want it (§7.1.1.2: "A server MAY include" it, unconditionally).
/// - `server_max_window_bits`: when offered, answered with min(offered, setting) (§7.1.2.1:
///   "the same or smaller value as the offer"). When not offered the RFC also lets the server
///   announce it, but nothing requires it: a client that did not limit our window inflates
///   with 32 KiB, which decodes any smaller window, so the deflater's smaller window needs no
///   announcement. Vigil leaves it out, because some clients (Firefox, per the permessage-
///   deflate Node module) fail the connection when it appears unasked.
/// - `client_max_window_bits`: only when offered (§7.1.2.2: otherwise the response "MUST NOT
///   include" it), answered with min(offered value or 15, setting), which bounds the
///   connection's inflater window. An offered 8 is accepted and answered with 8: inflating
///   with a larger window is always correct.
/// - A syntactically malformed header is not declined but fails the handshake with 400:
///   RFC 6455 §4.2.1 requires that for "any violations of the ABNF grammar specified for the
///   components of the handshake", and §9.1 gives Sec-WebSocket-Extensions such a grammar.
///   Only values that parse but mean nothing to permessage-deflate are declined.
///
/// Extension and parameter names compare exactly: RFC 7692 registers them in lower case and
/// RFC 6455 does not make them case-insensitive, so another spelling is an unknown name.
public enum PerMessageDeflate {
    /// The extension token (RFC 7692 §7).
    public static let name = "permessage-deflate"

    /// An accepted offer: what was agreed and the `Sec-WebSocket-Extensions` value to send.
    public struct Agreement: Equatable, Sendable {
        public var parameters: DeflateParameters
        /// The response header value, e.g. `permessage-deflate; server_no_context_takeover`.
        public var responseHeader: String
    }

    /// Negotiates over the raw header values (one string per header line). Returns nil when
    /// nothing is accepted (send no extension header), throws when the header is malformed
    /// (answer 400 with `ExtensionHeaderError.handshakeError`). With `settings.enabled` false
    /// the header is not read at all, the same as a server without extensions.
    public static func negotiate(_ headerValues: [String], settings: DeflateSettings) throws(ExtensionHeaderError) -> Agreement? {
        guard settings.enabled, !headerValues.isEmpty else { return nil }
        for offer in try ExtensionHeaderParser.parse(headerValues) where offer.name == name {
            if let agreement = accept(offer, settings: settings) { return agreement }
        }
        return nil
    }

    /// The client's side: what a server's response header agreed, mirrored for the client's own
    /// `MessageAssembler` (it inflates what the server compressed: the server's window and
    /// context rule). Nil when the response names no permessage-deflate (or a malformed one: the
    /// client then does not inflate, and an RSV1 frame fails as a protocol error, §9.1).
    /// A client that sends uncompressed (vigil-load) needs nothing else from the response.
    public static func clientInflation(fromResponse headerValues: [String]) -> DeflateParameters? {
        guard !headerValues.isEmpty, let offers = try? ExtensionHeaderParser.parse(headerValues),
              let agreed = offers.first(where: { $0.name == name }), let response = Offer(agreed.parameters) else { return nil }
        return DeflateParameters(
            serverNoContextTakeover: response.clientNoContextTakeover,
            clientNoContextTakeover: response.serverNoContextTakeover,
            serverMaxWindowBits: response.clientMaxWindowBits.flatMap { $0 } ?? 15,
            clientMaxWindowBits: response.serverMaxWindowBits ?? 15)
    }

    /// The client's parameters of one offer, or nil if it must be declined (§7).
    struct Offer {
        var serverNoContextTakeover = false
        var clientNoContextTakeover = false
        var serverMaxWindowBits: Int?
        /// nil: not offered; .some(nil): offered without a value.
        var clientMaxWindowBits: Int??

        init?(_ parameters: [ExtensionOffer.Parameter]) {
            for parameter in parameters {
                switch parameter.name {
                case "server_no_context_takeover":
                    guard !serverNoContextTakeover, parameter.value == nil else { return nil }
                    serverNoContextTakeover = true
                case "client_no_context_takeover":
                    guard !clientNoContextTakeover, parameter.value == nil else { return nil }
                    clientNoContextTakeover = true
                case "server_max_window_bits":
                    // §7.1.2.1: a value is required.
                    guard serverMaxWindowBits == nil, let bits = PerMessageDeflate.windowBits(parameter.value) else { return nil }
                    serverMaxWindowBits = bits
                case "client_max_window_bits":
                    guard clientMaxWindowBits == nil else { return nil }
                    if let value = parameter.value {
                        guard let bits = PerMessageDeflate.windowBits(value) else { return nil }
                        clientMaxWindowBits = .some(bits)
                    } else {
                        clientMaxWindowBits = .some(nil)
                    }
                default:
                    return nil
                }
            }
        }
    }

    /// The agreement for one offer, or nil to decline it.
    static func accept(_ offer: ExtensionOffer, settings: DeflateSettings) -> Agreement? {
        guard let client = Offer(offer.parameters) else { return nil }
        if let asked = client.serverMaxWindowBits, asked < 9 { return nil }
        var parameters = DeflateParameters(
            serverNoContextTakeover: client.serverNoContextTakeover || settings.serverNoContextTakeover,
            clientNoContextTakeover: client.clientNoContextTakeover || settings.clientNoContextTakeover,
            serverMaxWindowBits: min(client.serverMaxWindowBits ?? 15, settings.serverMaxWindowBits),
            clientMaxWindowBits: 15)
        var header = name
        if parameters.serverNoContextTakeover { header += "; server_no_context_takeover" }
        if parameters.clientNoContextTakeover { header += "; client_no_context_takeover" }
        if client.serverMaxWindowBits != nil { header += "; server_max_window_bits=\(parameters.serverMaxWindowBits)" }
        if let offered = client.clientMaxWindowBits {
            parameters.clientMaxWindowBits = min(offered ?? 15, settings.clientMaxWindowBits)
            header += "; client_max_window_bits=\(parameters.clientMaxWindowBits)"
        }
        return Agreement(parameters: parameters, responseHeader: header)
    }

    /// A window size value: 8...15 in decimal without leading zeroes (§7.1.2.1, §7.1.2.2).
    /// One or two ASCII digits, so "08", "+9", " 9" and "015" are all invalid.
    static func windowBits(_ value: String?) -> Int? {
        guard let value else { return nil }
        let digits = Array(value.utf8)
        guard digits.count == 1 || digits.count == 2, digits[0] != UInt8(ascii: "0") else { return nil }
        var bits = 0
        for d in digits {
            guard let v = HTTPSyntax.digit(d) else { return nil }
            bits = bits * 10 + v
        }
        return (8...15).contains(bits) ? bits : nil
    }
}
