import Testing
@testable import VigilPush

/// Standard Webhooks signatures: the spec's published vector, sign → verify, several signatures
/// in one header, and refusals of a changed body, id or timestamp, a stale timestamp, another
/// secret, and malformed headers.
@Suite struct WebhookSignatureTests {
    // The spec's test vector (standard-webhooks, the libraries' shared test).
    let vectorSecret = try! WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    let vectorID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
    let vectorTimestamp: Int64 = 1_614_265_330
    let vectorBody = Array(#"{"test": 2432232314}"#.utf8)
    let vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

    @Test func theSpecVector() throws {
        #expect(try WebhookSignature.sign(id: vectorID, timestamp: vectorTimestamp, body: vectorBody, secret: vectorSecret) == vectorSignature)
        try WebhookSignature.verify(id: vectorID, timestamp: "1614265330", signatureHeader: vectorSignature, body: vectorBody,
                                    secrets: [vectorSecret], now: vectorTimestamp)
    }

    @Test func headersOfOneAttempt() throws {
        let old = WebhookSecret.generate(), new = WebhookSecret.generate()
        let headers = try WebhookSignature.headers(id: "msg_1", timestamp: 1_700_000_000, body: [1, 2], secrets: [new, old])
        #expect(headers.map(\.name) == ["webhook-id", "webhook-timestamp", "webhook-signature"])
        #expect(headers[0].value == "msg_1" && headers[1].value == "1700000000")
        let entries = headers[2].value.split(separator: " ")
        #expect(entries.count == 2 && entries.allSatisfy { $0.hasPrefix("v1,") })
        // A receiver that knows either secret accepts.
        for secret in [old, new] {
            try WebhookSignature.verify(id: "msg_1", timestamp: "1700000000", signatureHeader: headers[2].value, body: [1, 2],
                                        secrets: [secret], now: 1_700_000_000)
        }
    }

    @Test func tamperingIsRefused() {
        func verify(id: String? = nil, timestamp: String = "1614265330", header: String? = nil, body: [UInt8]? = nil,
                    secret: WebhookSecret? = nil, now: Int64? = nil) throws(WebhookError) {
            try WebhookSignature.verify(id: id ?? vectorID, timestamp: timestamp, signatureHeader: header ?? vectorSignature,
                                        body: body ?? vectorBody, secrets: [secret ?? vectorSecret], now: now ?? vectorTimestamp)
        }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(body: Array(#"{"test": 2432232315}"#.utf8)) }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(id: "msg_p5jXN8AQM9LWM0D4loKWxJel") }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(timestamp: "1614265331", now: 1_614_265_331) }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(secret: WebhookSecret.generate()) }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(header: "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=") }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(header: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE") }
        #expect(throws: WebhookError.noMatchingSignature) { try verify(header: "") }
        // Among other entries, the matching one is found.
        #expect(throws: Never.self) { try verify(header: "v1a,xyz v1,AAAA " + vectorSignature) }
    }

    @Test func timestampTolerance() {
        func verify(now: Int64, timestamp: String = "1614265330") throws(WebhookError) {
            try WebhookSignature.verify(id: vectorID, timestamp: timestamp, signatureHeader: vectorSignature, body: vectorBody,
                                        secrets: [vectorSecret], now: now)
        }
        #expect(throws: Never.self) { try verify(now: vectorTimestamp + 300) }
        #expect(throws: Never.self) { try verify(now: vectorTimestamp - 300) }
        #expect(throws: WebhookError.timestampOutOfTolerance(timestamp: vectorTimestamp, now: vectorTimestamp + 301)) { try verify(now: vectorTimestamp + 301) }
        #expect(throws: WebhookError.timestampOutOfTolerance(timestamp: vectorTimestamp, now: vectorTimestamp - 301)) { try verify(now: vectorTimestamp - 301) }
        for bad in ["", "-1614265330", "+1614265330", "1614265330.0", "1e9", " 1614265330", "99999999999999999999"] {
            #expect(throws: WebhookError.badTimestamp, "\(bad)") { try verify(now: vectorTimestamp, timestamp: bad) }
        }
    }

    @Test func badIDs() {
        for id in ["", "msg 1", "msg\n1", String(repeating: "a", count: 256), "msg_é"] {
            #expect(throws: WebhookError.badID) { try WebhookSignature.sign(id: id, timestamp: 1, body: [], secret: vectorSecret) }
        }
    }
}
