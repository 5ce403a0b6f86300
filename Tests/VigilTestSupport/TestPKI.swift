import Foundation

/// The throwaway PKI of the TLS tests, made once per test process by Tests/make-test-pki (the
/// `openssl` command) in a temporary directory: a CA (`ca.pem`), a server certificate for
/// `localhost` and 127.0.0.1 (`server.pem`, `server.key`), a client certificate (`client.pem`,
/// `client.key`) and a CA that signed none of them (`other-ca.pem`).
public enum TestPKI {
    public static let directory: String = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-test-pki-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Tests/make-test-pki, next to this file's folder.
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("make-test-pki").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = [script, dir]
        try? p.run()
        p.waitUntilExit()
        return dir
    }()

    /// The path of one of the files.
    public static func file(_ name: String) -> String { directory + "/" + name }
}
