import Dispatch
import Foundation
import Glibc
import Synchronization

/// Host names resolved off the loop: `getaddrinfo` may wait seconds on a slow or dead DNS
/// server, so it runs on threads of its own, and each answer comes back to the loop through an
/// `Inbox` (handled in the turn after it is posted). The loop never blocks on DNS. The NATS
/// client and the HTTP client each own one.
///
/// `threads` lookups run at once (the NATS client needs one; the HTTP client several, so that a
/// push service whose DNS hangs does not hold up the names of the others). The threads start at
/// the first name to resolve (numeric addresses never start them), take requests in order, and
/// end at `stop()` (after the lookup under way, if any). Requests waiting for the same host and
/// port are answered by one lookup, so a dead DNS server cannot make the work grow with every
/// retry: each of their ids gets the answer. Answers are numeric addresses (`getnameinfo`,
/// `NI_NUMERICHOST`) in `getaddrinfo`'s order (RFC 6724's preference), at most 16, scoped IPv6
/// addresses left out; an answer the owner no longer waits for is the owner's to drop (its `id`
/// is stale). No host name is ever part of a failure's reason: reasons may be logged.
public final class NameResolver {
    /// A name to resolve; `id` comes back with the answer.
    public struct Request: Sendable {
        public var id: UInt64
        public var host: String
        public var port: UInt16

        public init(id: UInt64, host: String, port: UInt16) {
            self.id = id
            self.host = host
            self.port = port
        }
    }

    public struct Answer: Sendable {
        public var id: UInt64
        /// The numeric addresses, or why there are none.
        public var result: Result<[String], Failure>
    }

    /// Why a name has no address (`gai_strerror`, or strerror for a system error).
    public struct Failure: Error, Sendable, Equatable {
        public let reason: String
    }

    private let queue = LookupQueue()
    private let answers: Inbox<Answer>
    private var receiver: InboxReceiver<Answer>?
    private let threadCount: Int
    private let threadName: String
    private var started = false
    private var stopped = false

    public init(threads: Int = 1, threadName: String, loop: EventLoop, handle: @escaping (Answer) -> Void) throws(SystemError) {
        precondition(threads >= 1)
        threadCount = threads
        self.threadName = threadName
        answers = try Inbox()
        receiver = try answers.receive(on: loop, handle)
    }

    deinit { stop() }

    /// Asks for `host`'s addresses; the answer reaches `handle` on the loop in a later turn
    /// (never, once stopped).
    public func resolve(_ request: Request) {
        guard !stopped else { return }
        if !started {
            started = true
            for _ in 0..<threadCount { startThread() }
        }
        queue.put(request)
    }

    private func startThread() {
        let queue = self.queue, answers = self.answers
        queue.threadStarted()
        let thread = Thread {
            // Signals are the loop's (a signalfd): this thread may start before the daemon
            // blocks them process-wide, and a SIGTERM delivered here would kill the process.
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            while let batch = queue.take() {
                let result = Self.lookUp(host: batch[0].host, port: batch[0].port)
                for request in batch { answers.post(Answer(id: request.id, result: result)) }
            }
        }
        thread.name = threadName
        thread.start()
    }

    /// Stops the threads (once their lookups under way return) and the loop's watch of the answers.
    public func stop() {
        stopped = true
        receiver?.cancel()
        receiver = nil
        queue.stop()
    }

    /// The blocking lookup, on a resolver thread.
    public static func lookUp(host: String, port: UInt16) -> Result<[String], Failure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else {
            let reason = rc == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(rc))
            return .failure(Failure(reason: reason))
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
        guard !addresses.isEmpty else { return .failure(Failure(reason: "no usable address")) }
        return .success(addresses)
    }
}

/// The requests waiting for a resolver thread: the loop puts, the threads take. `Sendable` as
/// the compiler checks it: the list sits in a `Mutex`, and a thread sleeps on a semaphore that
/// each `put` signals once (a thread that wakes to find its request taken by another's batch
/// sleeps again).
private final class LookupQueue: Sendable {
    private struct State {
        var pending: [NameResolver.Request] = []
        var stopped = false
        var threads = 0
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    func put(_ request: NameResolver.Request) {
        let accepted = state.withLock { state in
            guard !state.stopped else { return false }
            state.pending.append(request)
            return true
        }
        if accepted { wake.signal() }
    }

    /// Counts a thread that will `take` (so that `stop` wakes every one).
    func threadStarted() { state.withLock { $0.threads += 1 } }

    /// Blocks until a request is waiting and takes it with every other waiting for the same host
    /// and port; nil once stopped.
    func take() -> [NameResolver.Request]? {
        while true {
            wake.wait()
            let batch: [NameResolver.Request]?? = state.withLock { state in
                guard !state.stopped else { return .some(nil) }
                guard !state.pending.isEmpty else { return .none }
                let first = state.pending.removeFirst()
                var batch = [first]
                state.pending.removeAll { request in
                    guard request.host == first.host && request.port == first.port else { return false }
                    batch.append(request)
                    return true
                }
                return .some(batch)
            }
            if let batch { return batch }
        }
    }

    func stop() {
        let threads = state.withLock { state in
            let first = !state.stopped
            state.stopped = true
            state.pending = []
            return first ? state.threads : 0
        }
        for _ in 0..<threads { wake.signal() }
    }
}
