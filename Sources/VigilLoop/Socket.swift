import CLinux
import Glibc

/// A listen address: `host:port`, `[v6]:port` or `:port` (all IPv4 interfaces).
public struct ListenAddress: Equatable, CustomStringConvertible, Sendable {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:0`, `:8080`; nil when malformed.
    public init?(parsing text: String) {
        var hostPart: Substring
        var portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portPart = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { return nil }  // bare IPv6 needs brackets
        }
        if hostPart.isEmpty { hostPart = "0.0.0.0" }
        guard let port = UInt16(portPart), !portPart.isEmpty else { return nil }
        guard SocketAddress(host: String(hostPart), port: port) != nil else { return nil }
        self.host = String(hostPart)
        self.port = port
    }

    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// A numeric IPv4 or IPv6 socket address (no DNS: a daemon's listen address is numeric).
public struct SocketAddress {
    var storage = sockaddr_storage()
    var length: socklen_t = 0

    public init?(host: String, port: UInt16) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            sin.sin_addr = v4
            withUnsafeBytes(of: &sin) { src in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: src) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_addr = v6
            withUnsafeBytes(of: &sin6) { src in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: src) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            return nil
        }
    }

    var family: Int32 { Int32(storage.ss_family) }
}

/// Thin, named wrappers over the socket syscalls the loop uses. Every failure names its call.
public enum Socket {
    /// Creates a non-blocking listening socket bound to `address`.
    public static func listen(on address: ListenAddress, backlog: Int32) throws -> Int32 {
        guard var sa = SocketAddress(host: address.host, port: address.port) else {
            throw SystemError("inet_pton(\(address.host))", errno: EINVAL)
        }
        let fd = socket(sa.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if sa.family == AF_INET6 {
            // An explicit IPv6 address means IPv6 only; listen on 0.0.0.0 too for both.
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &sa.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, sa.length) }
        }
        guard bound == 0 else {
            let error = SystemError("bind(\(address))")
            close(fd)
            throw error
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let error = SystemError("listen(\(address))")
            close(fd)
            throw error
        }
        return fd
    }

    /// The port a socket is bound to (for `:0` listens).
    public static func localPort(_ fd: Int32) -> UInt16? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        return withUnsafeBytes(of: &storage) { raw -> UInt16 in
            // sin_port and sin6_port sit at the same offset (2) in both layouts.
            UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
        }
    }

    /// Disables Nagle: Vigil's messages are small and latency matters more than packet count.
    public static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Creates a non-blocking TCP socket connecting to `address` (for clients: the load tester, tests).
    /// `source` binds the local side first, to spread connections over 127.0.0.0/8;
    /// `receiveBuffer` sets SO_RCVBUF (a client that means to stop reading keeps it small);
    /// `maxSegment` sets TCP_MAXSEG, the segment size offered in the SYN (loopback's 64 KiB
    /// segments make the peer's send buffer start at megabytes; an internet path has about 1,400).
    public static func connect(to address: ListenAddress, source: String? = nil, receiveBuffer: Int32? = nil,
                               maxSegment: Int32? = nil) throws -> Int32 {
        guard var sa = SocketAddress(host: address.host, port: address.port) else {
            throw SystemError("inet_pton(\(address.host))", errno: EINVAL)
        }
        let fd = socket(sa.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        if var size = receiveBuffer {
            // Before the connect, so the window offered in the SYN is already the small one.
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if var segment = maxSegment {
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_MAXSEG, &segment, socklen_t(MemoryLayout<Int32>.size))
        }
        if let source, var local = SocketAddress(host: source, port: 0) {
            // IP_BIND_ADDRESS_NO_PORT (24, linux/in.h): pick the port at connect time from the full
            // 4-tuple, instead of reserving a unique one per bind (a linear search per connection
            // once tens of thousands share a source address).
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_IP), 24, &one, socklen_t(MemoryLayout<Int32>.size))
            let bound = withUnsafePointer(to: &local.storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, local.length) }
            }
            guard bound == 0 else {
                let error = SystemError("bind(\(source))")
                close(fd)
                throw error
            }
        }
        let rc = withUnsafePointer(to: &sa.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, sa.length) }
        }
        guard rc == 0 || errno == EINPROGRESS else {
            let error = SystemError("connect(\(address))")
            close(fd)
            throw error
        }
        setNoDelay(fd)
        return fd
    }
}
