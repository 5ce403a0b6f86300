import Foundation
import Testing
@testable import VigilClient

// The e2e crypto without a server: round trips, every way an update must fail to open, padding,
// member boxes, the watch link's `k`, the test vectors of an independent implementation
// (clients/e2e-vectors/vectors.json, from Python's `cryptography`), and interop with the JS
// client through `node clients/js/test/e2e-cli.js` both ways. Twin of clients/js/test/e2e.test.js.

/// The repository's root, from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

private struct Vectors: Decodable {
    struct Seal: Decodable {
        var name, key, kid, status, nonce, plaintext, sealed: String
        var aad_hex: String
        var seq: UInt64
        var plaintext_bytes: Int
        var position: JSONValue
    }
    struct Box: Decodable {
        var name, member_secret, kid, stream_key, nonce, wrap_key_hex, aad_hex, box: String
        var member: UInt64
    }
    var seal: [Seal]
    var member_boxes: [Box]

    static func load() throws -> Vectors {
        let url = repositoryRoot.appendingPathComponent("clients/e2e-vectors/vectors.json")
        return try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

private func position(_ v: JSONValue) -> E2EPosition {
    E2EPosition(lat: v["lat"]!.doubleValue!, lon: v["lon"]!.doubleValue!, accuracyM: v["accuracy_m"]?.doubleValue,
                heading: v["heading"]?.doubleValue, speedMps: v["speed_mps"]?.doubleValue, note: v["note"]?.stringValue)
}

/// `sealed` with one bit of its decoded byte `index` flipped.
private func flip(_ sealed: String, _ index: Int) -> String {
    var bytes = E2E.base64urlDecode(sealed)!
    bytes[index] ^= 0x01
    return E2E.base64urlEncode(bytes)
}

private func expect(_ code: E2EError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected \(code.rawValue), got success", sourceLocation: sourceLocation)
    } catch let error as E2EError {
        #expect(error.code == code, sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected E2EError \(code.rawValue), got \(error)", sourceLocation: sourceLocation)
    }
}

private let sample = E2EPosition(lat: 51.5007, lon: -0.1246, accuracyM: 12.5, heading: 270, speedMps: 1.25, note: "near the bridge")

@Suite struct E2ETests {
    @Test func newKeysAreWellFormedAndDistinct() throws {
        let a = StreamKey.generate(), b = StreamKey.generate()
        #expect(a.bytes.count == 32)
        #expect(a.kid.utf8.count == 22 && E2E.isKid(a.kid))
        #expect(a.bytes != b.bytes && a.kid != b.kid)
        #expect(a.base64url.utf8.count == 43)
        #expect(try StreamKey(base64url: a.base64url, kid: a.kid) == a)
    }

    @Test func sealThenOpen() throws {
        let key = StreamKey.generate()
        for (seq, status) in [(UInt64(1), PanicStatus.red), (2, .amber), (UInt64.max, .red)] {
            let sealed = try E2E.seal(sample, key: key, seq: seq, status: status)
            #expect(try E2E.open(sealed, key: key, seq: seq, status: status) == sample)
        }
        let minimal = E2EPosition(lat: 0, lon: 0)
        #expect(try E2E.open(E2E.seal(minimal, key: key, seq: 1, status: .red), key: key, seq: 1, status: .red) == minimal)
        #expect(try E2E.seal(sample, key: key, seq: 1, status: .red) != E2E.seal(sample, key: key, seq: 1, status: .red))
    }

    @Test func tamperedBytesDoNotOpen() throws {
        let key = StreamKey.generate()
        let sealed = try E2E.seal(sample, key: key, seq: 5, status: .red)
        let length = E2E.base64urlDecode(sealed)!.count
        for index in [0, 11, 12, 40, length - 17, length - 1] {
            expect(.cannotDecrypt) { _ = try E2E.open(flip(sealed, index), key: key, seq: 5, status: .red) }
        }
        expect(.cannotDecrypt) { _ = try E2E.open(String(sealed.dropLast(4)), key: key, seq: 5, status: .red) }
    }

    @Test func otherSeqStatusKidOrKeyDoNotOpen() throws {
        let key = StreamKey.generate(), other = StreamKey.generate()
        let sealed = try E2E.seal(sample, key: key, seq: 5, status: .red)
        expect(.cannotDecrypt) { _ = try E2E.open(sealed, key: key, seq: 6, status: .red) }
        expect(.cannotDecrypt) { _ = try E2E.open(sealed, key: key, seq: 4, status: .red) }
        expect(.cannotDecrypt) { _ = try E2E.open(sealed, key: key, seq: 5, status: .amber) }
        let otherKid = try StreamKey(bytes: key.bytes, kid: other.kid)
        expect(.cannotDecrypt) { _ = try E2E.open(sealed, key: otherKid, seq: 5, status: .red) }
        let otherBytes = try StreamKey(bytes: other.bytes, kid: key.kid)
        expect(.cannotDecrypt) { _ = try E2E.open(sealed, key: otherBytes, seq: 5, status: .red) }
        expect(.cannotDecrypt) { _ = try E2E.open(sealed, key: other, seq: 5, status: .red) }
    }

    @Test func junkIsCannotDecrypt() {
        let key = StreamKey.generate()
        for junk in ["", "A", "not base64!", "AAAA", E2E.base64urlEncode([UInt8](repeating: 0, count: 27)), "a+b/c="] {
            expect(.cannotDecrypt) { _ = try E2E.open(junk, key: key, seq: 1, status: .red) }
        }
    }

    @Test func badArgumentsAreRefusedByName() {
        expect(.invalidKey) { _ = try StreamKey(bytes: [UInt8](repeating: 0, count: 16), kid: StreamKey.generate().kid) }
        expect(.invalidKid) { _ = try StreamKey(bytes: [UInt8](repeating: 0, count: 32), kid: "short") }
        expect(.invalidKey) { _ = try StreamKey(base64url: "AAAA", kid: StreamKey.generate().kid) }
        let key = StreamKey.generate()
        for bad in [E2EPosition(lat: 91, lon: 0), E2EPosition(lat: 0, lon: -181), E2EPosition(lat: .nan, lon: 0),
                    E2EPosition(lat: 0, lon: 0, accuracyM: -1), E2EPosition(lat: 0, lon: 0, heading: 361),
                    E2EPosition(lat: 0, lon: 0, speedMps: 1001)] {
            expect(.invalidPosition) { _ = try E2E.seal(bad, key: key, seq: 1, status: .red) }
        }
    }

    @Test func openedButNotAPositionIsInvalidPosition() throws {
        let key = StreamKey.generate()
        let aad = E2E.associatedData(kid: key.kid, seq: 1, status: .red)
        for body in [#"{"lat":100,"lon":0}"#, "[1,2]", "not json", #"{"lon":3}"#, #"{"lat":1,"lon":2,"note":7}"#] {
            let sealed = try E2E.gcmSeal(key: key.bytes, nonce: [UInt8](repeating: 0, count: 12), plaintext: Array(body.utf8), aad: aad)
            expect(.invalidPosition) { _ = try E2E.open(sealed, key: key, seq: 1, status: .red) }
        }
    }

    @Test func paddingIsTheSmallestMultipleOf64() throws {
        for n in 0...300 {
            let p = E2EPosition(lat: 1, lon: 2, note: String(repeating: "x", count: n))
            let bodyLength = #"{"lat":1,"lon":2,"note":""}"#.utf8.count + n
            let bytes = try E2E.encodePlaintext(p)
            #expect(bytes.count % 64 == 0 && bytes.count >= bodyLength && bytes.count - bodyLength < 64, "note of \(n)")
            #expect(bytes[bodyLength...].allSatisfy { $0 == 0x20 })
            #expect(try E2E.decodePlaintext(bytes) == p)
        }
        #expect(try E2E.encodePlaintext(E2EPosition(lat: 1, lon: 2, note: String(repeating: "x", count: 37))).count == 64)
        #expect(try E2E.encodePlaintext(E2EPosition(lat: 1, lon: 2, note: String(repeating: "é🙂", count: 20))).count % 64 == 0)
    }

    @Test func memberBoxes() throws {
        let key = StreamKey.generate(), other = StreamKey.generate()
        let ms = E2E.newMemberSecret()
        let box = try E2E.wrapForMember(key, memberSecret: ms, member: 3)
        #expect(try E2E.unwrapForMember(box, memberSecret: ms, kid: key.kid, member: 3) == key)
        expect(.cannotDecrypt) { _ = try E2E.unwrapForMember(box, memberSecret: ms, kid: key.kid, member: 4) }
        expect(.cannotDecrypt) { _ = try E2E.unwrapForMember(box, memberSecret: ms, kid: other.kid, member: 3) }
        expect(.cannotDecrypt) { _ = try E2E.unwrapForMember(box, memberSecret: E2E.newMemberSecret(), kid: key.kid, member: 3) }
        expect(.cannotDecrypt) { _ = try E2E.unwrapForMember(flip(box, 20), memberSecret: ms, kid: key.kid, member: 3) }
        #expect(E2E.base64urlDecode(box)!.count == 12 + 32 + 16)
    }

    @Test func keyFromFragment() {
        let key = StreamKey.generate()
        let k = key.base64url
        #expect(E2E.key(fromFragment: "#s=S&t=T&k=\(k)") == .key(key.bytes))
        #expect(E2E.key(fromFragment: "s=S&t=T&k=\(k)") == .key(key.bytes))
        #expect(E2E.key(fromFragment: "#s=S&t=T") == .absent)
        #expect(E2E.key(fromFragment: "#s=S&t=T&k=") == .absent)
        #expect(E2E.key(fromFragment: "") == .absent)
        #expect(E2E.key(fromFragment: "#s=S&k=" + k.dropFirst()) == .invalid)
        #expect(E2E.key(fromFragment: "#s=S&k=\(k)A") == .invalid)
    }

    @Test func base64url() {
        #expect(E2E.base64urlEncode([0xFB, 0xFF]) == "-_8")
        #expect(E2E.base64urlDecode("-_8") == [0xFB, 0xFF])
        #expect(E2E.base64urlDecode("-_8=") == nil)
        #expect(E2E.base64urlDecode("+/8") == nil)
        #expect(E2E.base64urlDecode("A") == nil)
        #expect(E2E.base64urlDecode("-_9") == nil)
        #expect(E2E.base64urlDecode("") == [])
    }

    @Test func sealVectors() throws {
        let vectors = try Vectors.load()
        #expect(vectors.seal.count >= 3)
        #expect(vectors.seal.contains { ($0.position["note"]?.stringValue ?? "").utf8.contains { $0 >= 0x80 } }, "a vector with a multi-byte note")
        for v in vectors.seal {
            let key = try StreamKey(base64url: v.key, kid: v.kid)
            let status = try #require(PanicStatus(rawValue: v.status))
            let p = position(v.position)
            #expect(hex(E2E.associatedData(kid: v.kid, seq: v.seq, status: status)) == v.aad_hex, "\(v.name)")
            let plaintext = try E2E.encodePlaintext(p)
            #expect(String(decoding: plaintext, as: UTF8.self) == v.plaintext, "\(v.name)")
            #expect(plaintext.count == v.plaintext_bytes, "\(v.name)")
            #expect(try E2E.open(v.sealed, key: key, seq: v.seq, status: status) == p, "\(v.name)")
            #expect(try E2E.seal(p, key: key, seq: v.seq, status: status, nonce: E2E.base64urlDecode(v.nonce)!) == v.sealed, "\(v.name)")
            expect(.cannotDecrypt) { _ = try E2E.open(v.sealed, key: key, seq: v.seq + 1, status: status) }
        }
    }

    @Test func memberBoxVectors() throws {
        let vectors = try Vectors.load()
        #expect(!vectors.member_boxes.isEmpty)
        for v in vectors.member_boxes {
            let ms = try #require(E2E.base64urlDecode(v.member_secret))
            let key = try StreamKey(base64url: v.stream_key, kid: v.kid)
            #expect(hex(try E2E.memberWrapKey(ms)) == v.wrap_key_hex, "\(v.name)")
            #expect(hex(E2E.boxAssociatedData(kid: v.kid, member: v.member)) == v.aad_hex, "\(v.name)")
            #expect(try E2E.unwrapForMember(v.box, memberSecret: ms, kid: v.kid, member: v.member) == key, "\(v.name)")
            #expect(try E2E.wrapForMember(key, memberSecret: ms, member: v.member, nonce: E2E.base64urlDecode(v.nonce)!) == v.box, "\(v.name)")
        }
    }
}

// MARK: interop with the JS client

/// Runs `node clients/js/test/e2e-cli.js arguments…`: its trimmed stdout and exit status. Fails
/// the test, never skips it, when node cannot be run.
func node(_ arguments: [String]) throws -> (output: String, status: Int32) {
    let script = repositoryRoot.appendingPathComponent("clients/js/test/e2e-cli.js").path
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["node", script] + arguments
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    p.waitUntilExit()
    if p.terminationStatus == 127 {
        throw NodeMissing(detail: "`/usr/bin/env node` exited 127: node is not installed or not on PATH; the e2e interop tests need Node.js 20+ (\(errors))")
    }
    if p.terminationStatus != 0 && p.terminationStatus != 2 {
        throw NodeMissing(detail: "node \(arguments.first ?? "") exited \(p.terminationStatus): \(errors)")
    }
    return (String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines), p.terminationStatus)
}

struct NodeMissing: Error, CustomStringConvertible {
    var detail: String
    var description: String { detail }
}

@Suite struct E2EInteropTests {
    @Test func jsSealsSwiftOpens() throws {
        let key = StreamKey.generate()
        let json = #"{"lat":-33.8568,"lon":151.2153,"accuracy_m":8,"heading":12.25,"speed_mps":0.5,"note":"Zoë 🚨 \"here\""}"#
        let sealed = try node(["seal", key.base64url, key.kid, "42", "amber", json])
        #expect(sealed.status == 0)
        let opened = try E2E.open(sealed.output, key: key, seq: 42, status: .amber)
        #expect(opened == E2EPosition(lat: -33.8568, lon: 151.2153, accuracyM: 8, heading: 12.25, speedMps: 0.5, note: "Zoë 🚨 \"here\""))
        expect(.cannotDecrypt) { _ = try E2E.open(sealed.output, key: key, seq: 43, status: .amber) }
    }

    @Test func swiftSealsJSOpens() throws {
        let key = StreamKey.generate()
        let p = E2EPosition(lat: 35.6586, lon: 139.7454, accuracyM: 20, note: "東京タワー, 2階")
        let sealed = try E2E.seal(p, key: key, seq: 9, status: .red)
        let opened = try node(["open", key.base64url, key.kid, "9", "red", sealed])
        #expect(opened.status == 0)
        #expect(opened.output == #"{"lat":35.6586,"lon":139.7454,"accuracy_m":20,"note":"東京タワー, 2階"}"#)
        // And JS refuses it under another status, as Swift does.
        #expect(try node(["open", key.base64url, key.kid, "9", "amber", sealed]) == ("error cannot_decrypt", 2))
    }

    @Test func memberBoxesBothWays() throws {
        let key = StreamKey.generate()
        let ms = E2E.newMemberSecret()
        let jsBox = try node(["wrap", E2E.base64urlEncode(ms), key.kid, "7", key.base64url])
        #expect(jsBox.status == 0)
        #expect(try E2E.unwrapForMember(jsBox.output, memberSecret: ms, kid: key.kid, member: 7) == key)
        let swiftBox = try E2E.wrapForMember(key, memberSecret: ms, member: 7)
        #expect(try node(["unwrap", E2E.base64urlEncode(ms), key.kid, "7", swiftBox]) == (key.base64url, 0))
        #expect(try node(["unwrap", E2E.base64urlEncode(ms), key.kid, "8", swiftBox]) == ("error cannot_decrypt", 2))
    }
}
