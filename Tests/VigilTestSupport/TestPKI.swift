import Foundation

/// The throwaway PKI of the TLS tests, made once per test process by Tests/make-test-pki (the
/// `openssl` command) in a temporary directory: a CA (`ca.pem`), a server certificate for
/// `localhost` and 127.0.0.1 (`server.pem`, `server.key`), a client certificate (`client.pem`,
/// `client.key`), a server certificate for a name no test connects to (`elsewhere.pem`,
/// `elsewhere.key`) and a CA that signed none of them (`other-ca.pem`).
///
/// Several suites of the process share it (they may run at once), so no suite removes it: the
/// process does as it exits, and one made by a test process that died before that is removed
/// by the next one that makes its own.
public enum TestPKI {
    static let prefix = "vigil-test-pki-"

    public static let directory: String = {
        let temporary = FileManager.default.temporaryDirectory
        removeLeftovers(in: temporary)
        let dir = temporary.appendingPathComponent(prefix + "\(getpid())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        atexit { TestPKI.removeOwnDirectory() }
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

    /// This process's directory, at exit (named again from the pid: an `atexit` handler captures nothing).
    static func removeOwnDirectory() {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(prefix + "\(getpid())").path
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// The directories of test processes that are gone (killed, or crashed before their exit).
    static func removeLeftovers(in temporary: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: temporary.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid != getpid() else { continue }
            if kill(pid, 0) == -1 && errno == ESRCH {
                try? FileManager.default.removeItem(atPath: temporary.appendingPathComponent(name).path)
            }
        }
    }
}
