// libFuzzer entry point for the v1 request decoder (VigilCore's RequestDecoder), every operation;
// built and run by Tests/fuzz/run against VigilCore built by SwiftPM with coverage.
//
// The input is a client message as it comes off the wire. The corpus starts from one valid request
// per operation (Tests/fuzz/seeds/decoder/), so mutations explore each operation's fields: wrong
// types, missing and unknown members, ids and tokens of every length and alphabet, numbers at and
// past their bounds, nested junk. Every input must decode to a request or to a refusal with a
// code; a refusal's field, when it names one, must be a member path. Anything else (a trap, a
// crash) stops the run.
import VigilCore

private let decoder: RequestDecoder = {
    var pins = PinSettings()
    pins.categories = ["general", "hazard", "help"]
    return RequestDecoder(settings: pins, panic: PanicSettings())
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func decoderFuzzEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    switch decoder.decode(UnsafeRawBufferPointer(start: data, count: size)) {
    case .success(let request):
        // A decoded operation is internally consistent: the write flag answers for every case.
        _ = request.operation.isWrite
    case .failure(let rejected):
        if rejected.error.code.isEmpty { fatalError("a refusal without a code") }
        if let field = rejected.error.field, field.isEmpty { fatalError("a refusal naming an empty field") }
    }
    return 0
}
