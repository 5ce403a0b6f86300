import CLinux
import Glibc
import VigilLoop

/// The listening socket: accepts until EAGAIN on each readiness event.
///
/// When the process runs out of descriptors (EMFILE/ENFILE), the pending connection would keep
/// the listener readable forever and the loop would spin; a reserved descriptor is released to
/// accept it and close it at once, then reopened (the classic reserve-fd technique).
final class Listener: EventHandler {
    let fd: Int32
    unowned let server: Server
    /// The TLS setup new connections start with (nil: a plain listener). Replaced on reload;
    /// connections keep the context they started with.
    var tls: TLSContext?
    /// The admin listener: its connections get the operator's endpoints only.
    let admin: Bool
    private var reserveFd: Int32
    var refused = 0
    private var lastExhaustionLogMs: Int64 = 0

    init(address: ListenAddress, backlog: Int32, server: Server, tls: TLSContext?, admin: Bool = false) throws {
        fd = try Socket.listen(on: address, backlog: backlog)
        self.server = server
        self.tls = tls
        self.admin = admin
        reserveFd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try server.loop.register(fd: fd, events: .readable, handler: self)
    }

    func handleEvents(_ events: IOEvents) {
        var address = (UInt64(0), UInt64(0))
        var hasAddress: Int32 = 0
        while true {
            let client = withUnsafeMutableBytes(of: &address) { vigil_accept_peer(fd, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), &hasAddress) }
            if client >= 0 {
                let peer = hasAddress != 0 ? withUnsafeBytes(of: &address) { PeerAddress(bytes: $0) } : nil
                server.adopt(fd: client, tls: tls, peer: peer, admin: admin)
                continue
            }
            switch errno {
            case EAGAIN, EWOULDBLOCK:
                return
            case EINTR, ECONNABORTED, EPROTO:
                continue
            case EMFILE, ENFILE:
                shedOne()
                return
            default:
                server.logger.error("accept4 failed", metadata: ["error": "\(SystemError("accept4"))"])
                return
            }
        }
    }

    private func shedOne() {
        let now = monotonicMilliseconds()
        if now - lastExhaustionLogMs > 10_000 {
            lastExhaustionLogMs = now
            server.logger.warning("out of file descriptors: refusing connections", metadata: ["error": "\(SystemError("accept4"))"])
        }
        guard reserveFd >= 0 else { return }
        Glibc.close(reserveFd)
        let client = vigil_accept(fd)
        if client >= 0 { Glibc.close(client) }
        reserveFd = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    func close() {
        server.loop.deregister(fd: fd)
        Glibc.close(fd)
        if reserveFd >= 0 { Glibc.close(reserveFd) }
        reserveFd = -1
    }
}
