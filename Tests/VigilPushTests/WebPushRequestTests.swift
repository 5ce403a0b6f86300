import Testing
@testable import VigilPush

/// One push request's headers and body: what the user agent decrypts, the VAPID token for the
/// endpoint's origin, TTL, Urgency and Topic, and the refusals of a bad TTL or Topic.
@Suite struct WebPushRequestTests {
    let agent: P256PrivateKey
    let subscription: PushSubscriptionKeys
    let signer: VAPIDSigner
    let endpoint: PushEndpoint

    init() throws {
        agent = try P256PrivateKey.generate()
        subscription = try PushSubscriptionKeys(p256dh: agent.publicKey, authSecret: [UInt8](repeating: 3, count: 16))
        signer = VAPIDSigner(key: try P256PrivateKey.generate(), subject: try VAPIDSubject("mailto:ops@vigil.example"))
        endpoint = try PushEndpoint("https://push.example.net/wpush/abc")
    }

    func value(_ request: WebPushRequest, _ name: String) -> String? {
        request.headers.first { $0.name == name }?.value
    }

    @Test func headersAndBody() throws {
        let notice = Array(#"{"kind":"checkin.requested"}"#.utf8)
        let request = try WebPushRequest(notice: notice, subscription: subscription, endpoint: endpoint, signer: signer,
                                         now: 1_700_000_000, ttl: 3600, urgency: .high, topic: "checkin-42")
        #expect(request.headers.map(\.name) == ["Authorization", "Content-Encoding", "Content-Type", "TTL", "Urgency", "Topic"])
        #expect(value(request, "Content-Encoding") == "aes128gcm")
        #expect(value(request, "TTL") == "3600")
        #expect(value(request, "Urgency") == "high")
        #expect(value(request, "Topic") == "checkin-42")
        #expect(value(request, "Authorization")?.hasSuffix(", k=" + signer.applicationServerKey) == true)
        #expect(try WebPushDecryption.decrypt(request.body, privateKey: agent, authSecret: subscription.authSecret) == notice)
        let plain = try WebPushRequest(notice: notice, subscription: subscription, endpoint: endpoint, signer: signer, now: 0, ttl: 0)
        #expect(plain.headers.map(\.name) == ["Authorization", "Content-Encoding", "Content-Type", "TTL"])
        #expect(PushUrgency.allCases.map(\.rawValue) == ["very-low", "low", "normal", "high"])
    }

    @Test func refusals() {
        func make(ttl: Int = 60, topic: String? = nil, notice: [UInt8] = [1]) throws(WebPushRequestError) {
            _ = try WebPushRequest(notice: notice, subscription: subscription, endpoint: endpoint, signer: signer, now: 0, ttl: ttl, topic: topic)
        }
        #expect(throws: WebPushRequestError.badTTL(-1)) { try make(ttl: -1) }
        for topic in ["", "has space", "dot.ted", String(repeating: "a", count: 33), "é"] {
            #expect(throws: WebPushRequestError.badTopic(topic)) { try make(topic: topic) }
        }
        #expect(throws: Never.self) { try make(topic: String(repeating: "a", count: 32)) }
        #expect(throws: WebPushRequestError.encryption(.plaintextTooLarge(count: 4000, limit: 3993))) {
            try make(notice: [UInt8](repeating: 0, count: 4000))
        }
    }
}
