import Testing
@testable import VigilPush

/// `whsec_` secrets: the spec's example parses, lengths outside 24...64 bytes and other texts are
/// refused, generated ones round-trip, and the key never reaches a description.
@Suite struct WebhookSecretTests {
    @Test func parsesTheSpecExample() throws {
        let secret = try WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        #expect(secret.key.count == 24)
        #expect(secret.text == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    }

    @Test func refusals() {
        #expect(throws: WebhookError.badSecret("does not start with whsec_")) { try WebhookSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") }
        #expect(throws: WebhookError.badSecret("not base64 after whsec_")) { try WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS") }
        #expect(throws: WebhookError.badSecret("not base64 after whsec_")) { try WebhookSecret("whsec_MfKQ9r8GKYqrTwjU-D8ILPZIo2LaLaSw") }
        #expect(throws: WebhookError.badSecret("18 bytes, not 24 to 64")) { try WebhookSecret("whsec_" + String(repeating: "AAAA", count: 6)) }
        #expect(throws: WebhookError.badSecret("66 bytes, not 24 to 64")) { try WebhookSecret(key: [UInt8](repeating: 1, count: 66)) }
    }

    @Test func generatedSecretsRoundTripAndStaySecret() throws {
        let secret = WebhookSecret.generate()
        #expect(secret.key.count == 32)
        #expect(try WebhookSecret(secret.text) == secret)
        #expect(secret != WebhookSecret.generate())
        #expect("\(secret)" == "whsec_(redacted)")
        #expect(!"\(secret)".contains(String(secret.text.dropFirst(6).prefix(8))))
    }
}
