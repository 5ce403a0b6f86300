import Testing
@testable import VigilWire

/// The single error-to-close-code mapping.
@Suite struct WireErrorTests {
    static let all: [WireError] = [
        .unmaskedFrame, .maskedFrameFromServer, .reservedBitsSet, .reservedOpcode(0xF),
        .controlFrameTooLong, .fragmentedControlFrame, .unexpectedContinuation, .expectedContinuation,
        .messageTooBig, .invalidUTF8, .invalidCloseCode(65535), .closePayloadTooShort,
        .nonMinimalLength, .lengthHighBitSet, .invalidCompressedData, .compressionFailed,
    ]

    @Test func closeCodes() {
        for error in WireErrorTests.all {
            let expected: UInt16
            switch error {
            case .messageTooBig: expected = 1009
            case .invalidUTF8, .invalidCompressedData: expected = 1007
            case .compressionFailed: expected = 1011
            default: expected = 1002
            }
            #expect(error.closeCode.rawValue == expected, "\(error)")
        }
    }

    @Test func reasonsFitAControlFrame() {
        for error in WireErrorTests.all {
            let payload = FrameEncoder.closePayload(code: error.closeCode, reason: error.reason)
            #expect(!error.reason.isEmpty)
            #expect(error.reason.utf8.count <= 123)
            #expect(payload.count == 2 + error.reason.utf8.count)
        }
    }
}
