// libFuzzer entry point for the JSON codec; built with the VigilCore/JSON sources by Tests/fuzz/run.
@_cdecl("LLVMFuzzerTestOneInput")
public func jsonFuzzEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzJSON(data, size)
    return 0
}
