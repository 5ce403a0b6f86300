import Glibc
import Testing
@testable import VigilPush

/// The key file: created 0600 and complete, never over an existing file, read back to the same
/// key; errors that name the operation and the path.
@Suite struct VAPIDKeyFileTests {
    /// A fresh directory for one test.
    func directory() throws -> String {
        var template = Array("/tmp/vigil-vapid-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil)
        return String(cString: made!)
    }

    func entries(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    @Test func createsAPrivateFileAndReadsItBack() throws {
        let dir = try directory()
        let path = dir + "/vapid.pem"
        let key = try VAPIDKeyFile.create(path)
        var info = stat()
        try #require(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(entries(dir) == ["vapid.pem"], "the temporary file is gone")
        #expect(try VAPIDKeyFile.read(path).publicKey == key.publicKey)
    }

    @Test func neverReplacesAKey() throws {
        let dir = try directory()
        let path = dir + "/vapid.pem"
        let first = try VAPIDKeyFile.create(path)
        #expect(throws: VAPIDError.fileExists(path)) { try VAPIDKeyFile.create(path) }
        #expect(try VAPIDKeyFile.read(path).publicKey == first.publicKey)
        #expect(entries(dir) == ["vapid.pem"])
    }

    @Test func readsAnOpenSSLKeyFile() throws {
        let path = try directory() + "/sec1.pem"
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        _ = TestKeys.sec1.withCString { write(fd, $0, strlen($0)) }
        close(fd)
        #expect(try VAPIDKeyFile.read(path).publicKey.bytes == TestKeys.sec1Public)
    }

    @Test func refusesAFileOpenToEveryUser() throws {
        let dir = try directory()
        let path = dir + "/vapid.pem"
        _ = try VAPIDKeyFile.create(path)
        chmod(path, 0o640)
        _ = try VAPIDKeyFile.read(path)  // a service group may read it
        chmod(path, 0o644)
        #expect(throws: VAPIDError.notPrivate(path: path, why: "readable or writable by every user (mode 644)")) { try VAPIDKeyFile.read(path) }
        chmod(path, 0o602)
        #expect(throws: VAPIDError.notPrivate(path: path, why: "readable or writable by every user (mode 602)")) { try VAPIDKeyFile.read(path) }
        #expect(throws: VAPIDError.notPrivate(path: dir, why: "not a regular file")) { try VAPIDKeyFile.read(dir) }
    }

    @Test func errorsNameTheOperation() throws {
        let dir = try directory()
        #expect(throws: VAPIDError.file(operation: "open \(dir)/missing.pem", errno: ENOENT)) { try VAPIDKeyFile.read(dir + "/missing.pem") }
        let temporary = "\(dir)/no/such/vapid.pem.tmp-\(getpid())"
        #expect(throws: VAPIDError.file(operation: "open \(temporary)", errno: ENOENT)) { try VAPIDKeyFile.create(dir + "/no/such/vapid.pem") }
        let notKey = dir + "/not-a-key.pem"
        let fd = open(notKey, O_WRONLY | O_CREAT, 0o600)
        close(fd)
        #expect(throws: VAPIDError.key(.unreadablePEM)) { try VAPIDKeyFile.read(notKey) }
    }
}
