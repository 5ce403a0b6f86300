import CLinux
import Glibc

/// Something the loop can wake: a byte stream, a listener, a timer, signal or inbox fd.
///
/// `handleEvents` is called on the loop thread only. It may close its own fd or others' (through
/// `EventLoop.deregister`): events already fetched for a deregistered fd in the same batch are
/// recognised as stale by their generation and dropped.
public protocol EventHandler: AnyObject {
    func handleEvents(_ events: IOEvents)
}

/// The readiness bits of one epoll event, named.
public struct IOEvents: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let readable = IOEvents(rawValue: VIGIL_EPOLLIN)
    public static let writable = IOEvents(rawValue: VIGIL_EPOLLOUT)
    public static let error = IOEvents(rawValue: VIGIL_EPOLLERR)
    public static let hangup = IOEvents(rawValue: VIGIL_EPOLLHUP)
    public static let readHangup = IOEvents(rawValue: VIGIL_EPOLLRDHUP)
}

/// A single-threaded epoll reactor (level-triggered), and the order of one loop turn.
///
/// One turn, in this order (docs/ARCHITECTURE.md walks it in full):
/// 1. wait for events (not at all when `requestTurn()` asked for another turn);
/// 2. hand each event to its handler: streams read into the shared `readBuffer` and their
///    owners apply what they read; timers and signals run as ordinary handlers;
/// 3. run the end-of-turn steps in the order they were added (the server's: fan-out, then the
///    journal's write and fsync), so everything produced in 2 is queued and recorded;
/// 4. flush every stream with output: one `writev` each;
/// 5. close the fds released during the turn.
///
/// Handlers are kept in an array indexed by fd; the epoll user data packs `generation << 32 | fd`
/// (nginx's "instance" idea) so an event for an fd that was deregistered within the batch is
/// ignored. Closing fds only at step 5 means no fd number is reused within a turn, so anything that
/// names a connection by its fd during the turn (a fan-out list) never reaches a newcomer.
public final class EventLoop {
    private struct Registration {
        let handler: EventHandler  // retained while registered; the local copy in `turn` keeps it alive through its own callback
        let generation: UInt32
        var interest: UInt32
    }

    private let epfd: Int32
    private var registrations: ContiguousArray<Registration?> = []
    private var nextGeneration: UInt32 = 1
    private var running = false
    private var anotherTurn = false
    private var endOfTurnSteps: [() -> Void] = []
    /// Streams to flush at the end of the turn: `answerList` first (their queue got bytes of
    /// their own this turn: a reply, a welcome, a pong), then `flushList` (only shared fan-out
    /// frames). Each stream sits in at most one of them (`ByteStream.State.queuedForFlush`).
    private var answerList: [ByteStream] = []
    private var flushList: [ByteStream] = []
    private var closeList: [Int32] = []
    private let maxEvents: Int32 = 1024
    private let masks: UnsafeMutablePointer<UInt32>
    private let datas: UnsafeMutablePointer<UInt64>

    /// The loop's shared read buffer: every stream reads into it in turn, so an idle connection
    /// owns no read buffer at all. Valid only during a `handleEvents` call.
    public let readBuffer: UnsafeMutableRawBufferPointer
    /// Pooled output chunks for every stream of this loop.
    public let chunks: ChunkPool
    /// Scratch iovecs for `writev`, shared by every flush (one flush runs at a time).
    let iovecs: UnsafeMutablePointer<iovec>
    static let maxIovecs = 64
    /// Reads a stream makes per readiness event before yielding to the others (level-triggered
    /// epoll reports it again next turn if more is waiting). 1 keeps a server fair between
    /// clients; a load client that owns every connection may read more per wake.
    public var readsPerWake = 1

    /// The number of registered fds.
    public private(set) var registeredCount = 0
    /// Bytes queued on every stream of this loop and not yet written (a shared chunk counts once
    /// per queue it is on): what a global output budget reads.
    public internal(set) var queuedBytes = 0
    /// Bytes read from and written to every stream of this loop (TLS: plaintext), for metrics.
    public internal(set) var bytesRead = 0
    public internal(set) var bytesWritten = 0

    public init(readBufferSize: Int = 64 * 1024, chunkSize: Int = 16 * 1024) throws(SystemError) {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError("epoll_create1") }
        epfd = fd
        masks = .allocate(capacity: Int(maxEvents))
        datas = .allocate(capacity: Int(maxEvents))
        readBuffer = .allocate(byteCount: readBufferSize, alignment: 16)
        iovecs = .allocate(capacity: Self.maxIovecs)
        chunks = ChunkPool(chunkSize: chunkSize)
    }

    deinit {
        for fd in closeList { Glibc.close(fd) }
        Glibc.close(epfd)
        masks.deallocate()
        datas.deallocate()
        readBuffer.deallocate()
        iovecs.deallocate()
    }

    // MARK: registration

    /// Starts watching `fd` for `events` on behalf of `handler` (which the loop retains until `deregister`).
    public func register(fd: Int32, events: IOEvents, handler: EventHandler) throws(SystemError) {
        let index = Int(fd)
        if index >= registrations.count {
            registrations.append(contentsOf: repeatElement(nil, count: max(index + 1 - registrations.count, registrations.count / 2 + 64)))
        }
        precondition(registrations[index] == nil, "fd \(fd) registered twice")
        let generation = nextGeneration
        nextGeneration = nextGeneration == UInt32.max ? 1 : nextGeneration + 1
        let data = UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
        guard vigil_epoll_ctl(epfd, EPOLL_CTL_ADD, fd, events.rawValue, data) == 0 else {
            throw SystemError("epoll_ctl(ADD)")
        }
        registrations[index] = Registration(handler: handler, generation: generation, interest: events.rawValue)
        registeredCount += 1
    }

    /// Changes the watched events of a registered fd; a no-op when they are unchanged. A failure
    /// (ENOMEM, or EBADF for an fd closed behind the loop's back) is thrown, never dropped: the
    /// caller's stream cannot be trusted to be woken any more.
    public func modify(fd: Int32, events: IOEvents) throws(SystemError) {
        let index = Int(fd)
        guard index < registrations.count, var reg = registrations[index] else { return }
        if reg.interest == events.rawValue { return }
        let data = UInt64(reg.generation) << 32 | UInt64(UInt32(bitPattern: fd))
        guard vigil_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, events.rawValue, data) == 0 else {
            throw SystemError("epoll_ctl(MOD)")
        }
        reg.interest = events.rawValue
        registrations[index] = reg
    }

    /// Stops watching `fd` and releases its handler. Call before closing the fd.
    public func deregister(fd: Int32) {
        let index = Int(fd)
        guard index < registrations.count, registrations[index] != nil else { return }
        _ = vigil_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, 0, 0)  // fails only for an fd already gone, which is what we want
        registrations[index] = nil
        registeredCount -= 1
    }

    /// Deregisters `fd` now and closes it at the end of this turn (step 5), so the number is not
    /// reused while the turn's lists may still name it.
    public func closeAfterTurn(_ fd: Int32) {
        deregister(fd: fd)
        closeList.append(fd)
    }

    // MARK: the turn

    /// Adds a step to run at every end of turn, after the events and before the flush (step 3).
    /// Steps run in the order they were added.
    public func addEndOfTurnStep(_ step: @escaping () -> Void) {
        endOfTurnSteps.append(step)
    }

    /// Queues `stream` for the flush at the end of this turn (the stream makes sure it is queued
    /// once). `answer`: it holds an answer to its peer (see `turn`), flushed before the fan-out's.
    func scheduleFlush(_ stream: ByteStream, answer: Bool) {
        if answer { answerList.append(stream) } else { flushList.append(stream) }
    }

    /// Asks for another turn without waiting: work was produced outside the turn's event handling
    /// (e.g. during a flush) and must not sit until the next event.
    public func requestTurn() {
        anotherTurn = true
    }

    /// Runs turns until `stop()` is called from a handler or step.
    public func run() throws(SystemError) {
        running = true
        while running {
            try turn(timeoutMs: -1)
        }
    }

    /// Runs one turn, waiting at most `timeoutMs` for events (-1: until one arrives). For tests
    /// that drive a server step by step, and for `run`.
    public func turn(timeoutMs: Int32) throws(SystemError) {
        let wait = anotherTurn ? 0 : timeoutMs
        anotherTurn = false
        let n = vigil_epoll_wait(epfd, masks, datas, maxEvents, wait)
        if n < 0 && errno != EINTR { throw SystemError("epoll_wait") }
        for i in 0..<Int(max(n, 0)) {
            let data = datas[i]
            let fd = Int(UInt32(truncatingIfNeeded: data))
            let generation = UInt32(truncatingIfNeeded: data >> 32)
            // Stale: deregistered earlier in this batch.
            guard fd < registrations.count, let reg = registrations[fd], reg.generation == generation else { continue }
            reg.handler.handleEvents(IOEvents(rawValue: masks[i]))
        }
        for step in endOfTurnSteps { step() }
        // Answers first: which connection is written first does not change what any one peer
        // receives (each queue is in order), but a client waiting for its reply (a publisher's `ok`
        // in a closed loop) gets it before the loop spends the flush on a thousand subscribers'
        // writes, so its next request is there for the next turn. Flushed last, the replies of all
        // but the first request of a turn waited for the whole fan-out: each turn then carried
        // one or two events, and each subscriber's write one or two frames instead of many.
        // A flush may queue more (a stream whose queue drained may answer its peer, e.g. a close
        // frame): whatever joins either list is flushed in this same step, answers still first.
        var (i, j) = (0, 0)
        while true {
            if i < answerList.count {
                answerList[i].flushAtEndOfTurn()
                i += 1
            } else if j < flushList.count {
                flushList[j].flushAtEndOfTurn()
                j += 1
            } else {
                break
            }
        }
        answerList.removeAll(keepingCapacity: true)
        flushList.removeAll(keepingCapacity: true)
        for fd in closeList { Glibc.close(fd) }
        closeList.removeAll(keepingCapacity: true)
    }

    /// Makes `run()` return after the current turn.
    public func stop() {
        running = false
    }
}
