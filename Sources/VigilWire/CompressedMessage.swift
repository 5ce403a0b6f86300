/// The compressed-message half of `MessageAssembler`: a connection's `Inflater` and the UTF-8
/// check of what it inflates (RFC 7692 §7.2.2 then RFC 6455 §8.1).
///
/// Why a class of its own: the assembler lives inline in every connection, and most
/// connections negotiate no compression; this way they pay one optional reference for it,
/// and the uncompressed path keeps its shape. Allocated once per connection that agreed
/// permessage-deflate; its own fields are ~40 bytes beside the inflater's (see `Inflater`).
final class CompressedMessage {
    let inflater: Inflater
    /// Validates inflated text incrementally: the reader sees only compressed bytes.
    private var validator = UTF8Validator()
    /// Inflated bytes already validated.
    private var validated = 0
    /// Whether the current message is text to validate.
    private var checksText = false
    /// The reader's `validatesText` before this message turned it off.
    private(set) var readerValidatedText = true

    init(_ parameters: DeflateParameters, maxMessageBytes: Int, pool: InflaterPool?) {
        inflater = Inflater(windowBits: parameters.inflateWindowBits,
                            noContextTakeover: parameters.clientNoContextTakeover,
                            maxMessageBytes: maxMessageBytes, pool: pool)
    }

    /// A compressed message begins; `readerValidates` is the reader's setting, which the
    /// caller turns off for this message (the reader would check compressed bytes).
    func start(_ kind: MessageKind, readerValidates: Bool) {
        readerValidatedText = readerValidates
        checksText = kind == .text && readerValidates
        validator.reset()
        validated = 0
    }

    /// Inflates the next compressed chunk and checks the text it produced.
    func feed(_ chunk: UnsafeRawBufferPointer) -> WireError? {
        if let error = inflater.inflate(chunk) { return error }
        return validateNew()
    }

    /// The message's last frame ended: the whole inflated message, or why it failed.
    func finish() -> Result<UnsafeRawBufferPointer, WireError> {
        if let error = inflater.finishMessage() { return .failure(error) }
        if let error = validateNew() { return .failure(error) }
        if checksText && !validator.isAtBoundary {
            inflater.discard()
            return .failure(.invalidUTF8)
        }
        return .success(inflater.output)
    }

    /// Validates the bytes inflated since the last call: fails at the first bad chunk, not at
    /// the end of the message.
    private func validateNew() -> WireError? {
        guard checksText else { return nil }
        let output = inflater.output
        let fresh = UnsafeRawBufferPointer(rebasing: output[validated...])
        validated = output.count
        if validator.feed(fresh) { return nil }
        inflater.discard()
        return .invalidUTF8
    }
}
