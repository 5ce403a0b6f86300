import Foundation
import Glibc
import VigilLoop

/// Host names of NATS URLs resolved off the loop: `getaddrinfo` may wait seconds on a slow or
/// dead DNS server, so it runs on one small thread of its own, and the answer comes back to the
/// loop through an `Inbox` (handled in the turn after it is posted). The loop never blocks on DNS.
///
/// One thread per client, started at the first name to resolve (a list of numeric addresses
/// never starts it), taking requests in order from its own inbox, and stopped by `stop()` (after
/// the lookup under way, if any). Answers are numeric addresses (`getnameinfo`,
/// `NI_NUMERICHOST`) in `getaddrinfo`'s order (RFC 6724's preference); an answer to a request
/// the client no longer waits for is dropped by the client (its `id` is stale).
final class NATSResolver {
    struct Request: Sendable {
        var id: UInt64
        var host: String
        var port: UInt16
    }

    struct Answer: Sendable {
        var id: UInt64
        /// The numeric addresses, or why there are none (`gai_strerror`, no host name in it).
        var result: Result<[String], ResolveFailure>
    }

    struct ResolveFailure: Error, Sendable {
        let reason: String
    }

    private enum Order: Sendable {
        case resolve(Request)
        case stop
    }

    private let orders: Inbox<Order>
    private let answers: Inbox<Answer>
    private var receiver: InboxReceiver<Answer>?
    private var started = false

    init(loop: EventLoop, handle: @escaping (Answer) -> Void) throws(SystemError) {
        orders = try Inbox()
        answers = try Inbox()
        receiver = try answers.receive(on: loop, handle)
    }

    deinit { stop() }

    /// Asks for `host`'s addresses; the answer reaches `handle` on the loop in a later turn.
    func resolve(_ request: Request) {
        if !started {
            started = true
            let orders = self.orders, answers = self.answers
            let thread = Thread {
                // Signals are the loop's (a signalfd): this thread may start before the daemon
                // blocks them process-wide, and a SIGTERM delivered here would kill the process.
                var all = sigset_t()
                sigfillset(&all)
                pthread_sigmask(SIG_BLOCK, &all, nil)
                while true {
                    // Requests that piled up behind a slow lookup: only the newest per host and
                    // port is answered (the client waits for no other), so a dead DNS server
                    // cannot make the queue grow with every reconnection pass.
                    var latest: [Request] = []
                    for order in orders.wait(timeoutMs: -1) {
                        switch order {
                        case .stop: return
                        case .resolve(let request):
                            latest.removeAll { $0.host == request.host && $0.port == request.port }
                            latest.append(request)
                        }
                    }
                    for request in latest { answers.post(Self.lookUp(request)) }
                }
            }
            thread.name = "vigil-nats-dns"
            thread.start()
        }
        orders.post(.resolve(request))
    }

    /// Stops the thread (once its lookup under way returns) and the loop's watch of the answers.
    func stop() {
        receiver?.cancel()
        receiver = nil
        if started { orders.post(.stop) }
        started = false
    }

    /// The blocking lookup, on the resolver's thread.
    static func lookUp(_ request: Request) -> Answer {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(request.host, String(request.port), &hints, &list)
        guard rc == 0 else {
            let reason = rc == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(rc))
            return Answer(id: request.id, result: .failure(ResolveFailure(reason: reason)))
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var entry = list
        while let e = entry, addresses.count < 16 {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if let sa = e.pointee.ai_addr,
               getnameinfo(sa, e.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let numeric = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                // A scoped IPv6 address (fe80::1%eth0) is left out: ListenAddress has no scope.
                if !numeric.contains("%") && !addresses.contains(numeric) { addresses.append(numeric) }
            }
            entry = e.pointee.ai_next
        }
        guard !addresses.isEmpty else { return Answer(id: request.id, result: .failure(ResolveFailure(reason: "no usable address"))) }
        return Answer(id: request.id, result: .success(addresses))
    }
}
