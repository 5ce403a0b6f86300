import Foundation
import Testing
import VigilReplication
import VigilLoop
import VigilNATS

/// The layout checked against an independent implementation of the object store: nats-py's
/// (Tests/interop/objstore_nats_py.py; Tests/setup-deps installs it), which reads what
/// SnapshotStore writes (verifying the digest itself), and writes an object SnapshotStore reads
/// the meta of and replaces.
@Suite(.serialized) struct SnapshotStoreInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../interop/objstore_nats_py.py").standardized.path

    /// Runs the script; its JSON output, or a failure with its stderr.
    func natsPy(_ arguments: [String]) throws -> [String: Any] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", Self.script] + arguments
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw TestFailure("nats-py \(arguments.first ?? "") failed (Tests/setup-deps installs nats-py): \(stderr.suffix(400))")
        }
        return try #require(try JSONSerialization.jsonObject(with: stdout) as? [String: Any])
    }

    @Test func natsPyReadsWhatSnapshotStoreWritesAndTheOtherWayRound() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let h = snapshotHarness(client, loop)
        let bytes = seededBytes(1_048_576 + 5, seed: 11)
        let published = try h.put(bytes, sequence: 9).get()

        let read = try natsPy(["get", server.url, "T_SNAPSHOTS", "latest"])
        #expect(read["length"] as? Int == bytes.count && read["size"] as? Int == bytes.count && read["chunks"] as? Int == 9)
        #expect(read["digest"] as? String == published.info.digest)
        let sha = try #require(JSObjectDigest.parse(published.info.digest)).map { String($0, radix: 16).leftPadded(2) }.joined()
        #expect(read["sha256"] as? String == sha)

        // nats-py replaces the object: its meta reads (nats-py writes no `metadata`, so it is not
        // taken for a Vigil snapshot, and says so).
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-interop-\(getpid())")
        try Data(seededBytes(300_000, seed: 12)).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let written = try natsPy(["put", server.url, "T_SNAPSHOTS", "latest", file.path])
        #expect(written["size"] as? Int == 300_000 && written["chunks"] as? Int == 3)
        guard case .failure(.corrupt(let why)) = try h.getNewest() else { Issue.record("nats-py's object was taken for a snapshot"); return }
        #expect(why.contains("metadata"), "\(why)")

        // SnapshotStore replaces nats-py's object in turn and purges its chunks.
        let again = try h.put(bytes, sequence: 10).get()
        #expect(again.purgedMessages == 3)
        #expect(try h.streamInfo().messages == 10)
        #expect(try natsPy(["get", server.url, "T_SNAPSHOTS", "latest"])["digest"] as? String == again.info.digest)
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
