import CLinux
import Glibc
import Synchronization

/// Messages from other threads to the loop thread: a locked list and an eventfd that wakes the loop.
///
/// The loop thread owns every connection and hub and takes no locks on its hot path; work that
/// may block (writing a snapshot, later replication) runs on its own thread and reports back by
/// posting here. The loop then handles each message as an ordinary event, in the turn that
/// follows the post (`InboxReceiver`).
///
/// Why it is `Sendable`: its only mutable state is the message list inside a `Mutex`, and the
/// eventfd is an immutable number whose counter the kernel updates atomically. The compiler checks
/// this (no `@unchecked`): the messages themselves must be `Sendable`.
public final class Inbox<Message: Sendable>: Sendable {
    private let messages = Mutex<[Message]>([])
    /// The eventfd the loop watches.
    let fd: Int32

    public init() throws(SystemError) {
        let fd = vigil_eventfd_create()
        guard fd >= 0 else { throw SystemError("eventfd") }
        self.fd = fd
    }

    deinit { Glibc.close(fd) }

    /// Posts from any thread; the loop handles the message in its next turn.
    public func post(_ message: Message) {
        messages.withLock { $0.append(message) }
        _ = vigil_eventfd_signal(fd)
    }

    /// Everything posted so far, oldest first (empty when nothing is waiting).
    public func takeAll() -> [Message] {
        _ = vigil_eventfd_drain(fd)
        return messages.withLock { list in
            var taken: [Message] = []
            swap(&taken, &list)
            return taken
        }
    }

    /// Blocks the calling thread until something is posted or `timeoutMs` passes (-1: no limit),
    /// then takes everything. For a graceful shutdown, which must wait for a snapshot write
    /// still running on its thread before it writes the final one.
    public func wait(timeoutMs: Int32) -> [Message] {
        let ready = takeAll()
        if !ready.isEmpty { return ready }
        _ = vigil_wait_readable(fd, timeoutMs)
        return takeAll()
    }

    /// Watches the inbox on `loop`: `handle` runs on the loop thread for each message, in order.
    public func receive(on loop: EventLoop, _ handle: @escaping (Message) -> Void) throws(SystemError) -> InboxReceiver<Message> {
        let receiver = InboxReceiver(inbox: self, loop: loop, handle: handle)
        try loop.register(fd: fd, events: .readable, handler: receiver)
        return receiver
    }
}

/// The loop side of an `Inbox`: registered on the loop, it hands each posted message to the
/// loop-thread handler. Not `Sendable`: it lives and runs on the loop thread only.
public final class InboxReceiver<Message: Sendable>: EventHandler {
    private let inbox: Inbox<Message>
    private unowned let loop: EventLoop
    private let handle: (Message) -> Void

    init(inbox: Inbox<Message>, loop: EventLoop, handle: @escaping (Message) -> Void) {
        self.inbox = inbox
        self.loop = loop
        self.handle = handle
    }

    public func handleEvents(_ events: IOEvents) {
        for message in inbox.takeAll() { handle(message) }
    }

    /// Stops watching (the inbox itself may still be posted to; nothing will read it here).
    public func cancel() {
        loop.deregister(fd: inbox.fd)
    }
}
