import Testing
@testable import VigilWire

/// Which close codes a peer may send (RFC 6455 §7.4, IANA registry).
@Suite struct CloseCodeTests {
    @Test func constants() {
        #expect(CloseCode.normal.rawValue == 1000)
        #expect(CloseCode.goingAway.rawValue == 1001)
        #expect(CloseCode.protocolError.rawValue == 1002)
        #expect(CloseCode.unsupportedData.rawValue == 1003)
        #expect(CloseCode.noStatus.rawValue == 1005)
        #expect(CloseCode.abnormal.rawValue == 1006)
        #expect(CloseCode.invalidPayload.rawValue == 1007)
        #expect(CloseCode.policyViolation.rawValue == 1008)
        #expect(CloseCode.messageTooBig.rawValue == 1009)
        #expect(CloseCode.mandatoryExtension.rawValue == 1010)
        #expect(CloseCode.internalError.rawValue == 1011)
        #expect(CloseCode.tryAgainLater.rawValue == 1013)
    }

    @Test func validReceivedRanges() {
        for code in 0...UInt16.max {
            let expected = (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code)
            if CloseCode.isValidReceived(code) != expected {
                Issue.record("code \(code)")
                return
            }
        }
        for local in [CloseCode.noStatus, .abnormal] {
            #expect(!CloseCode.isValidReceived(local.rawValue))
        }
        #expect(!CloseCode.isValidReceived(1015))
    }
}
