import Foundation
import Glibc

/// The throwaway PKI of the TLS tests, made once per test process by Tests/make-test-pki (the
/// `openssl` command) in a temporary directory: `ca.pem`, `server.pem`/`server.key` (for
/// localhost and 127.0.0.1, signed by the CA), `other-ca.pem` (signed nothing). The same script
/// as VigilTestSupport's `TestPKI`, run here because that target would bring the daemon's
/// modules into this one's graph.
enum ClientTestPKI {
    static let directory: String = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-client-pki-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("make-test-pki").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = [script, dir]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try? p.run()
        p.waitUntilExit()
        atexit { try? FileManager.default.removeItem(atPath: FileManager.default.temporaryDirectory.appendingPathComponent("vigil-client-pki-\(getpid())").path) }
        return dir
    }()

    static func file(_ name: String) -> String { directory + "/" + name }
}

/// Runs `operation`, or fails with `TimeoutError` after `limit`: a bound on a wait for an event,
/// never a pause.
func within<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TimeoutError(limit: limit)
        }
        let first = try await group.next()!
        group.cancelAll()
        return first
    }
}

struct TimeoutError: Error, CustomStringConvertible {
    var limit: Duration
    var description: String { "not done within \(limit)" }
}
