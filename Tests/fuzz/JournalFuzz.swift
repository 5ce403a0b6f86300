// libFuzzer entry point for the journal reader; built and run by Tests/fuzz/run.
// Linked against the instrumented VigilState, VigilCore and VigilGeo modules.
//
// Every input is read three ways: as one record's payload (`decodeRecord`, past the frame checksum
// that would stop most random bytes), as a run of framed records (`scan`), and, when it starts
// with the magic, as a segment file (header, then records). Whatever decodes must re-encode to the
// same bytes (a record of an older layout: to bytes that read back as the same record), and `scan`
// must stop inside the input and return only records that round-trip.
// Seeds: Tests/fuzz/seeds/journal, written by the real encoder (SnapshotFuzzSeedTests).
import VigilCore
import VigilState

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let record = try? JournalCodec.decodeRecord(payload: bytes) {
        let payload = Array(JournalCodec.encode(record)[JournalCodec.frameBytes...])
        precondition(payload == bytes || rewritesAnOlderLayout(record) && (try? JournalCodec.decodeRecord(payload: payload)) == record,
                     "a decoded payload re-encodes differently")
    }
    var start = 0
    if bytes.count >= JournalCodec.headerBytes, (try? JournalCodec.readHeader(bytes)) != nil { start = JournalCodec.headerBytes }
    let scan = JournalCodec.scan(bytes, from: start)
    precondition(scan.validLength >= start && scan.validLength <= bytes.count, "valid length outside the input")
    precondition((scan.stop == nil) == (scan.validLength == bytes.count), "a scan that stops early must say why")
    var reencoded: [UInt8] = []
    for record in scan.records { JournalCodec.append(record, to: &reencoded) }
    precondition(reencoded.elementsEqual(bytes[start..<scan.validLength])
                     || scan.records.contains(where: rewritesAnOlderLayout) && JournalCodec.scan(reencoded, from: 0).records == scan.records,
                 "scanned records re-encode differently")
    return 0
}

/// A record read from an older layout, which the encoder writes in the current one: an escalation
/// journaled before escalations kept their sending time (event kind 5) reads as sent at its own
/// time and is written as kind 6. It must then read back as the same record.
func rewritesAnOlderLayout(_ record: JournalRecord) -> Bool {
    if case .panicEvent(_, let event) = record, case .missedCheckIn(_, _, let sentAt) = event.kind, sentAt == event.at { return true }
    return false
}
