import CLinux
import Glibc
import Testing
@testable import VigilLoop

/// sd_notify datagrams, received on a socket the test binds (as systemd would).
@Suite struct ServiceNotifierTests {
    /// A bound Unix datagram socket and a way to read one message from it.
    final class Receiver {
        let fd: Int32
        init(address: inout sockaddr_un, length: socklen_t) {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            precondition(rc == 0, "bind: errno \(errno)")
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        deinit { close(fd) }
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            return n >= 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }
    }

    @Test func sendsToAFilesystemSocket() throws {
        let path = "/tmp/vigil-notify-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        var address = sockaddr_un()
        let length = try #require(ServiceNotifier.fill(&address, path: path))
        let receiver = Receiver(address: &address, length: length)
        let notifier = try #require(ServiceNotifier(socketPath: path))
        #expect(notifier.send("READY=1\nSTATUS=serving"))
        #expect(receiver.receive() == "READY=1\nSTATUS=serving")
        #expect(notifier.send("STOPPING=1"))
        #expect(receiver.receive() == "STOPPING=1")
    }

    @Test func sendsToAnAbstractSocket() throws {
        let name = "@vigil-notify-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var address = sockaddr_un()
        let length = try #require(ServiceNotifier.fill(&address, path: name))
        // An abstract name is counted by the length: no terminating NUL.
        #expect(Int(length) == MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.utf8.count)
        let receiver = Receiver(address: &address, length: length)
        let notifier = try #require(ServiceNotifier(socketPath: name))
        #expect(notifier.send("WATCHDOG=1"))
        #expect(receiver.receive() == "WATCHDOG=1")
    }

    @Test func refusesNamesItCannotUse() {
        var address = sockaddr_un()
        for bad in ["", "relative/path", "/" + String(repeating: "x", count: 200), "@" + String(repeating: "x", count: 200)] {
            #expect(ServiceNotifier.fill(&address, path: bad) == nil, "\(bad.prefix(20))")
        }
        #expect(ServiceNotifier(socketPath: "relative") == nil)
    }

    @Test func theWatchdogPingsAtHalfItsTimeoutAndOnlyForThisProcess() {
        #expect(ServiceNotifier.watchdogInterval(usec: "30000000", pid: nil, ownPid: 7) == 15_000)
        #expect(ServiceNotifier.watchdogInterval(usec: "30000000", pid: "7", ownPid: 7) == 15_000)
        #expect(ServiceNotifier.watchdogInterval(usec: "30000000", pid: "8", ownPid: 7) == nil)
        #expect(ServiceNotifier.watchdogInterval(usec: nil, pid: nil, ownPid: 7) == nil)
        #expect(ServiceNotifier.watchdogInterval(usec: "0", pid: nil, ownPid: 7) == nil)
        #expect(ServiceNotifier.watchdogInterval(usec: "soon", pid: nil, ownPid: 7) == nil)
        #expect(ServiceNotifier.watchdogInterval(usec: "1000", pid: nil, ownPid: 7) == 1)
    }
}
