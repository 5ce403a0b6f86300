import Testing
@testable import VigilCore

/// The pure model of end-to-end encrypted streams (PanicE2E.swift) and the decoding of its fields
/// (RequestDecoder+E2E.swift).
@Suite struct PanicE2ETests {
    let kid = "AAECAwQFBgcICQoLDA0ODw"          // bytes 0...15
    let decoder = RequestDecoder(settings: PinSettings(), panic: PanicSettings(sealedMaxBytes: 120))

    func sealedText(_ count: Int, fill: UInt8 = 7) -> String { Base64URL.encode([UInt8](repeating: fill, count: count)) }

    func object(_ text: String) throws -> JSONObject {
        try #require(try JSONParser.parse(Array(text.utf8)).object)
    }

    func failure(_ body: () throws -> Any?) -> RequestError? {
        do { _ = try body(); return nil } catch let e as RequestError { return e } catch { return nil }
    }

    // MARK: key id

    @Test func keyIDTakesTheCanonical22CharacterFormOnly() {
        #expect(E2EKeyID(kid)?.text == kid)
        #expect(E2EKeyID(bytes: Array(0...15)).text == kid)
        #expect(E2EKeyID(String(kid.dropLast())) == nil)                  // 21 characters
        #expect(E2EKeyID(kid + "A") == nil)                                // 23
        #expect(E2EKeyID("AAECAwQFBgcICQoLDA0ODx") == nil)               // unused low bits set
        #expect(E2EKeyID("AAECAwQFBgcICQoLDA0OD+") == nil)               // not base64url
        #expect(E2EKeyID("AAECAwQFBgcICQoLDA0ODw==") == nil)             // padded
        #expect(E2EKeyID(bytes: Array(0...15)).bytes == Array(0...15))
        #expect("\(E2EKeyID(bytes: Array(0...15)))" == "<kid>", "a log line never shows a key id")
    }

    // MARK: sealed bytes

    @Test func sealedBytesAreBoundedOnBothSides() {
        #expect(SealedBytes.parse(sealedText(28), maxBytes: 120).map(\.count) == .success(28))
        #expect(SealedBytes.parse(sealedText(120), maxBytes: 120).map(\.count) == .success(120))
        #expect(SealedBytes.parse(sealedText(121), maxBytes: 120) == .failure(.tooLarge))
        #expect(SealedBytes.parse(sealedText(27), maxBytes: 120) == .failure(.tooShort))
        #expect(SealedBytes.parse(sealedText(30) + "==", maxBytes: 120) == .failure(.notBase64URL))
        #expect(SealedBytes.parse("+" + sealedText(30).dropFirst(), maxBytes: 120) == .failure(.notBase64URL))
        #expect(SealedBytes.parse("", maxBytes: 120) == .failure(.tooShort))
        // A huge text is refused by its length, before it is decoded.
        #expect(SealedBytes.parse(String(repeating: "!", count: 1_000_000), maxBytes: 120) == .failure(.tooLarge))
    }

    @Test func aSealedValueNeverDescribesItsBytes() throws {
        let sealed = try SealedBytes.parse(sealedText(40, fill: 0x41), maxBytes: 120).get()
        #expect("\(sealed)" == "<sealed 40 bytes>")
        #expect(sealed.text == sealedText(40, fill: 0x41))
    }

    // MARK: the seq/status rule

    @Test func aSealedUpdateMustNameTheNextSeqAndTheCurrentStatus() {
        #expect(SealedSeqCheck.check(seq: 5, status: .red, streamSeq: 4, streamStatus: .red) == nil)
        #expect(SealedSeqCheck.check(seq: 4, status: .red, streamSeq: 4, streamStatus: .red) == .seqMismatch(currentSeq: 4, status: .red))
        #expect(SealedSeqCheck.check(seq: 6, status: .red, streamSeq: 4, streamStatus: .red) == .seqMismatch(currentSeq: 4, status: .red))
        #expect(SealedSeqCheck.check(seq: 5, status: .amber, streamSeq: 4, streamStatus: .red) == .seqMismatch(currentSeq: 4, status: .red))
        #expect(SealedSeqCheck.check(seq: 0, status: .red, streamSeq: .max, streamStatus: .red) == .seqMismatch(currentSeq: .max, status: .red))
    }

    @Test func seqMismatchIsAnsweredWithTheCurrentSeqAndStatus() {
        let e = RequestError.from(PanicFailure.seqMismatch(currentSeq: 9, status: .amber))
        #expect(e.code == "seq_mismatch")
        #expect(e.currentSeq == 9 && e.currentStatus == .amber)
        var w = JSONWriter()
        ServerMessages.error(ref: .number(3), e, into: &w)
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text.contains("\"code\":\"seq_mismatch\""))
        #expect(text.contains("\"current_seq\":9"))
        #expect(text.contains("\"status\":\"amber\""))
    }

    // MARK: keys and boxes

    @Test func aMemberGetsItsOwnBoxOnly() throws {
        let a = try SealedBytes.parse(sealedText(40, fill: 1), maxBytes: 120).get()
        let b = try SealedBytes.parse(sealedText(40, fill: 2), maxBytes: 120).get()
        let keys = E2EKeys(kid: try #require(E2EKeyID(kid)), boxes: [MemberBox(member: 7, box: b), MemberBox(member: 2, box: a)])
        #expect(keys.boxes.map(\.member) == [2, 7])
        #expect(keys.box(forMember: 2) == a)
        #expect(keys.box(forMember: 7) == b)
        #expect(keys.box(forMember: 3) == nil)
        #expect(keys.boxBytes == 80)
    }

    // MARK: decoding panic.start's e2e

    @Test func decodesAnE2EStart() throws {
        let o = try object("""
            {"status":"red","e2e":{"v":1,"kid":"\(kid)","sealed":"\(sealedText(92))","boxes":[{"member":2,"box":"\(sealedText(60))"}]}}
            """)
        let start = try #require(try decoder.e2eStart(o, forCircle: true))
        #expect(start.keys.kid.text == kid)
        #expect(start.sealed.count == 92)
        #expect(start.keys.boxes.map(\.member) == [2])
        #expect(try decoder.e2eStart(try object(#"{"status":"red","lat":1,"lon":2}"#), forCircle: false) == nil)
    }

    @Test func anE2EStartRefusesEveryClearLocationField() throws {
        for field in RequestDecoder.clearLocationFields {
            let value = field == "note" ? "\"hi\"" : "1"
            let o = try object("""
                {"status":"red","\(field)":\(value),"e2e":{"v":1,"kid":"\(kid)","sealed":"\(sealedText(92))"}}
                """)
            let e = failure { try decoder.e2eStart(o, forCircle: false) }
            #expect(e?.code == "invalid_e2e" && e?.field == field)
        }
    }

    @Test func anE2EStartNamesWhatIsWrong() throws {
        func code(_ e2e: String, circle: Bool = false) throws -> (String?, String?) {
            let e = failure { try decoder.e2eStart(try object("{\"status\":\"red\",\"e2e\":\(e2e)}"), forCircle: circle) }
            return (e?.code, e?.field)
        }
        let s = sealedText(92)
        #expect(try code("1") == ("invalid_e2e", "e2e"))
        #expect(try code(#"{"kid":"\#(kid)","sealed":"\#(s)"}"#) == ("missing_field", "e2e.v"))
        #expect(try code(#"{"v":2,"kid":"\#(kid)","sealed":"\#(s)"}"#) == ("unsupported_e2e_version", "e2e.v"))
        #expect(try code(#"{"v":1,"sealed":"\#(s)"}"#) == ("missing_field", "e2e.kid"))
        #expect(try code(#"{"v":1,"kid":"short","sealed":"\#(s)"}"#) == ("invalid_kid", "e2e.kid"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)"}"#) == ("missing_field", "e2e.sealed"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":5}"#) == ("invalid_sealed", "e2e.sealed"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(sealedText(121))"}"#) == ("sealed_too_large", "e2e.sealed"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(s)","lat":1}"#) == ("unknown_field", "e2e.lat"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(s)","boxes":[]}"#) == ("invalid_boxes", "e2e.boxes"))
        let box = #"{"member":1,"box":"\#(sealedText(40))"}"#
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(s)","boxes":[\#(box),\#(box)]}"#, circle: true)
                == ("invalid_boxes", "e2e.boxes[1].member"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(s)","boxes":[{"member":0,"box":"\#(sealedText(40))"}]}"#, circle: true)
                == ("invalid_boxes", "e2e.boxes[0].member"))
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(s)","boxes":[{"member":1,"box":"\#(sealedText(121))"}]}"#, circle: true)
                == ("sealed_too_large", "e2e.boxes[0].box"))
        let many = (1...33).map { #"{"member":\#($0),"box":"\#(sealedText(40))"}"# }.joined(separator: ",")
        #expect(try code(#"{"v":1,"kid":"\#(kid)","sealed":"\#(s)","boxes":[\#(many)]}"#, circle: true) == ("invalid_boxes", "e2e.boxes"))
    }

    @Test func noErrorMessageEchoesASealedValue() throws {
        let s = sealedText(121, fill: 0x5A)
        let e = failure { try decoder.e2eStart(try object(#"{"e2e":{"v":1,"kid":"\#(kid)","sealed":"\#(s)"}}"#), forCircle: false) }
        let message = try #require(e?.message)
        #expect(!message.contains(s.prefix(20)))
        let k = failure { try decoder.e2eStart(try object(#"{"e2e":{"v":1,"kid":"\#(kid)X","sealed":"\#(s)"}}"#), forCircle: false) }
        #expect(k.map { !$0.message.contains(kid) } == true)
    }

    // MARK: a sealed panic.update

    @Test func decodesASealedUpdate() throws {
        let o = try object(#"{"stream":"x","sealed":"\#(sealedText(92))","kid":"\#(kid)","seq":4,"status":"amber"}"#)
        let u = try #require(try decoder.sealedUpdate(o))
        #expect(u.seq == 4 && u.status == .amber && u.point.kid.text == kid && u.point.sealed.count == 92)
        #expect(try decoder.sealedUpdate(try object(#"{"stream":"x","lat":1,"lon":2}"#)) == nil)
    }

    @Test func aSealedUpdateNamesWhatIsWrong() throws {
        func code(_ body: String) throws -> (String?, String?) {
            let e = failure { try decoder.sealedUpdate(try object(body)) }
            return (e?.code, e?.field)
        }
        let s = sealedText(92)
        #expect(try code(#"{"sealed":"\#(s)","kid":"\#(kid)","seq":4,"status":"red","lat":1}"#) == ("invalid_e2e", "lat"))
        #expect(try code(#"{"sealed":"\#(s)","kid":"\#(kid)","seq":4,"status":"red","note":"x"}"#) == ("invalid_e2e", "note"))
        #expect(try code(#"{"sealed":"\#(s)","kid":"\#(kid)","status":"red"}"#) == ("missing_field", "seq"))
        #expect(try code(#"{"sealed":"\#(s)","kid":"\#(kid)","seq":0,"status":"red"}"#) == ("invalid_seq", "seq"))
        #expect(try code(#"{"sealed":"\#(s)","kid":"\#(kid)","seq":1.5,"status":"red"}"#) == ("invalid_seq", "seq"))
        #expect(try code(#"{"sealed":"\#(s)","kid":"\#(kid)","seq":2}"#) == ("missing_field", "status"))
        #expect(try code(#"{"sealed":"\#(s)","seq":2,"status":"red"}"#) == ("missing_field", "kid"))
        #expect(try code(#"{"kid":"\#(kid)","seq":2,"lat":1,"lon":1}"#) == ("invalid_e2e", "kid"))
        #expect(try code(#"{"sealed":"\#(sealedText(121))","kid":"\#(kid)","seq":2,"status":"red"}"#) == ("sealed_too_large", "sealed"))
    }

    // MARK: panic.rekey

    @Test func decodesARekey() throws {
        let o = try object(#"{"kid":"\#(kid)","boxes":[{"member":3,"box":"\#(sealedText(40))"}]}"#)
        let keys = try decoder.rekeyKeys(o)
        #expect(keys.kid.text == kid && keys.boxes.map(\.member) == [3])
        #expect(try decoder.rekeyKeys(try object(#"{"kid":"\#(kid)"}"#)).boxes.isEmpty)
        #expect(failure { try decoder.rekeyKeys(try object(#"{"boxes":[]}"#)) }?.field == "kid")
    }
}
