/// Reading the journal back at startup.
extension StateDirectory {
    /// Feeds `body` every record of segments `segment`, `segment + 1`, … in order, and says what
    /// it found.
    ///
    /// Damage is handled by where it is. At the tail of the last segment, a record cut short, with
    /// an impossible length or a failed checksum is the write a crash interrupted (never
    /// acknowledged, since acknowledgement waits for the sync): with `repairTornTail` the file is
    /// truncated to its last good record, so new appends follow good data. Anywhere else (a middle
    /// segment, a missing segment, a bad header, a record this build cannot read) it is real
    /// damage: replay stops there and `corruption` says where; nothing is truncated. Whether to
    /// start with the state up to that point is the caller's decision.
    public func readJournal(from segment: UInt64, repairTornTail: Bool = true,
                            _ body: (JournalRecord) -> Void) throws(StateError) -> JournalReadReport {
        let present = try listing().journals
        var report = JournalReadReport(lastSegment: present.last)
        let segments = present.filter { $0 >= segment }
        var expected = segment
        for (index, number) in segments.enumerated() {
            let name = StateFileName.journal(number).name
            guard number == expected else {
                report.corruption = "\(StateFileName.journal(expected).name) is missing (the next segment present is \(name))"
                return report
            }
            expected = number + 1
            let isLast = index == segments.count - 1
            let bytes = try StateFiles.readAll(file(name))
            var entry = JournalReadReport.Segment(segment: number, file: name, size: bytes.count, validLength: 0, records: 0, stop: nil)
            // An empty segment (opened, nothing written before the next one began, or a crash
            // right after its creation) holds no record, wherever it is. A header cut short can
            // only be the last write of the last segment.
            if bytes.isEmpty || (bytes.count < JournalCodec.headerBytes && isLast) {
                if !bytes.isEmpty {
                    entry.stop = "header cut short at \(bytes.count) bytes"
                    if repairTornTail {
                        try StateFiles.truncate(file(name), to: 0)
                        report.truncatedTail = .init(file: name, size: bytes.count, keptBytes: 0)
                    }
                }
                report.segments.append(entry)
                continue
            }
            do throws(StateError) {
                let named = try JournalCodec.readHeader(bytes)
                guard named == number else {
                    throw .invalid(what: "journal header", offset: 12, reason: "names segment \(StateFileName.hex(named))")
                }
            } catch {
                entry.stop = "bad header: \(error)"
                report.segments.append(entry)
                report.corruption = "\(name): bad header: \(error)"
                return report
            }
            let scan = JournalCodec.scan(bytes, from: JournalCodec.headerBytes)
            for record in scan.records { body(record) }
            entry.validLength = scan.validLength
            entry.records = scan.records.count
            report.records += scan.records.count
            entry.stop = scan.stop?.description
            report.segments.append(entry)
            guard let stop = scan.stop else { continue }
            if isLast && stop.isTornWrite {
                if repairTornTail {
                    try StateFiles.truncate(file(name), to: scan.validLength)
                    report.truncatedTail = .init(file: name, size: bytes.count, keptBytes: scan.validLength)
                }
            } else {
                report.corruption = "\(name): \(stop)" + (isLast ? "" : " (not the last segment)")
                return report
            }
        }
        return report
    }
}
