// libFuzzer entry point for VigilPush's readers of hostile bytes; built and run by Tests/fuzz/run.
// Linked against the instrumented VigilPush, VigilWire and VigilBytes modules and libcrypto.
//
// The first byte chooses the reader, the rest is its input:
//   0  WebPushDecryption.decrypt with the RFC 8291 example's user agent key (the aes128gcm header
//      parser, the key id, the record, the tag, the padding): a typed error or a notice no longer
//      than its body allows, never a trap
//   1  ContentCodingHeader.parse: what parses re-encodes to the bytes it consumed
//   2  ECDSASignature.raw(der:): what converts converts back to the same DER (one encoding only)
//   3  Base64URLCoding.decode: what decodes re-encodes to the text without its padding
//   4  PushEndpoint: what parses gives an origin that parses to the same origin
//   5  the Standard Webhooks verifier over a header and a body split from the input
// Seeds: Tests/fuzz/seeds/push (the RFC body, a DER signature, an endpoint, a header).
import VigilPush

let userAgent = try! P256PrivateKey(scalar: Base64URLCoding.decode("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")!)
let auth = Base64URLCoding.decode("BTBZMqHH6r4Tts7J_aSIgg")!
let secret = try! WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: input, as: UTF8.self)
    switch data[0] % 6 {
    case 0:
        guard let notice = try? WebPushDecryption.decrypt(input, privateKey: userAgent, authSecret: auth) else { return 0 }
        precondition(notice.count <= max(0, input.count - 86 - 17), "a notice longer than its body allows")
    case 1:
        guard let (header, consumed) = try? ContentCodingHeader.parse(input) else { return 0 }
        var out: [UInt8] = []
        header.encode(into: &out)
        precondition(out == Array(input.prefix(consumed)), "the header does not re-encode to its bytes")
    case 2:
        guard let raw = try? ECDSASignature.raw(der: input) else { return 0 }
        precondition(raw.count == 64, "raw signature of \(raw.count) bytes")
        precondition((try? ECDSASignature.der(raw: raw)) == input, "DER accepted in a second encoding")
    case 3:
        guard let bytes = Base64URLCoding.decode(text) else { return 0 }
        precondition(Base64URLCoding.encode(bytes) == String(text.prefix { $0 != "=" }), "base64url accepted in a second form")
    case 4:
        guard let endpoint = try? PushEndpoint(text, allowLoopbackHTTP: true) else { return 0 }
        let again = try? PushEndpoint(endpoint.origin, allowLoopbackHTTP: true)
        precondition(again?.origin == endpoint.origin, "the origin \(endpoint.origin) does not parse to itself")
        precondition(endpoint.requestTarget.hasPrefix("/"), "a request target without its slash")
    default:
        let parts = input.split(separator: 0, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4 else { return 0 }
        let field = { (i: Int) in String(decoding: parts[i], as: UTF8.self) }
        _ = try? WebhookSignature.verify(id: field(0), timestamp: field(1), signatureHeader: field(2), body: Array(parts[3]),
                                         secrets: [secret], now: 1_614_265_330)
    }
    return 0
}
