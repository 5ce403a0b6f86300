import CLinux
import Glibc

/// Something the loop can wake: a listener, a connection, a timer or signal fd.
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

/// A single-threaded epoll reactor (level-triggered).
///
/// Handlers are kept in an array indexed by fd; the epoll user data packs `generation << 32 | fd`
/// (nginx's "instance" idea) so an event for an fd that was closed and reused within one batch is
/// ignored instead of being delivered to the wrong owner. After each batch the loop runs its
/// end-of-turn hooks: that is where connections flush the output queued during the turn, so
/// many small sends become one `writev` per connection per turn.
public final class EventLoop {
    private struct Registration {
        let handler: EventHandler  // retained while registered; the local copy in `run` keeps it alive through its own callback
        let generation: UInt32
        var interest: UInt32
    }

    private let epfd: Int32
    private var registrations: ContiguousArray<Registration?> = []
    private var nextGeneration: UInt32 = 1
    private var running = false
    private var endOfTurn: [() -> Void] = []
    private let maxEvents: Int32 = 1024
    private let masks: UnsafeMutablePointer<UInt32>
    private let datas: UnsafeMutablePointer<UInt64>

    /// The loop's shared read buffer: every connection reads into it in turn, so an idle
    /// connection owns no read buffer at all. Valid only during a `handleEvents` call.
    public let readBuffer: UnsafeMutableRawBufferPointer

    /// The number of registered fds.
    public private(set) var registeredCount = 0

    public init(readBufferSize: Int = 64 * 1024) throws {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError("epoll_create1") }
        epfd = fd
        masks = .allocate(capacity: Int(maxEvents))
        datas = .allocate(capacity: Int(maxEvents))
        readBuffer = .allocate(byteCount: readBufferSize, alignment: 16)
    }

    deinit {
        close(epfd)
        masks.deallocate()
        datas.deallocate()
        readBuffer.deallocate()
    }

    /// Starts watching `fd` for `events` on behalf of `handler` (which the loop retains until `deregister`).
    public func register(fd: Int32, events: IOEvents, handler: EventHandler) throws {
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

    /// Changes the watched events of a registered fd; a no-op when they are unchanged.
    public func modify(fd: Int32, events: IOEvents) {
        let index = Int(fd)
        guard index < registrations.count, var reg = registrations[index] else { return }
        if reg.interest == events.rawValue { return }
        let data = UInt64(reg.generation) << 32 | UInt64(UInt32(bitPattern: fd))
        if vigil_epoll_ctl(epfd, EPOLL_CTL_MOD, fd, events.rawValue, data) == 0 {
            reg.interest = events.rawValue
            registrations[index] = reg
        }
    }

    /// Stops watching `fd` and releases its handler. Call before closing the fd.
    public func deregister(fd: Int32) {
        let index = Int(fd)
        guard index < registrations.count, registrations[index] != nil else { return }
        _ = vigil_epoll_ctl(epfd, EPOLL_CTL_DEL, fd, 0, 0)
        registrations[index] = nil
        registeredCount -= 1
    }

    /// Adds a hook that runs after every batch of events (and before the loop sleeps again).
    public func addEndOfTurnHook(_ hook: @escaping () -> Void) {
        endOfTurn.append(hook)
    }

    /// Runs until `stop()` is called from a handler or hook.
    public func run() throws {
        running = true
        while running {
            let n = vigil_epoll_wait(epfd, masks, datas, maxEvents, -1)
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("epoll_wait")
            }
            for i in 0..<Int(n) {
                let data = datas[i]
                let fd = Int(UInt32(truncatingIfNeeded: data))
                let generation = UInt32(truncatingIfNeeded: data >> 32)
                // Stale: closed (and maybe reused) earlier in this batch.
                guard fd < registrations.count, let reg = registrations[fd], reg.generation == generation else { continue }
                reg.handler.handleEvents(IOEvents(rawValue: masks[i]))
            }
            for hook in endOfTurn { hook() }
        }
    }

    /// Makes `run()` return after the current turn.
    public func stop() {
        running = false
    }
}
