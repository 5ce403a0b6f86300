#if os(Linux)
import Foundation
import Glibc
import Synchronization
import VigilWire

/// A WebSocket connection of ``SocketTransport``: the async face of a socket thread.
///
/// The socket, its TLS session and the frame decoder belong to the connection's own thread
/// (`SocketEngine`). This object only hands requests to that thread and takes its results, through
/// `ConnectionCore` (one mutex, a wake pipe):
/// - `send` frames and masks the text on the caller's task, queues the frame and suspends until
///   the thread has written it to the kernel: the cooperative pool never blocks on the socket, and
///   a sender that outpaces the network waits instead of piling frames up;
/// - `receive` takes the next message from a buffer the thread fills; past
///   ``SocketTransport/Options/receiveBufferBytes`` the thread stops reading the socket (TCP's
///   window then holds the server back) until the reader catches up;
/// - `close` asks for the closing handshake and returns once the socket is closed (within the
///   close timeout);
/// - dropping the last reference aborts the connection, so a forgotten one frees its thread.
public final class SocketConnection: VigilConnection {
    let core: ConnectionCore
    /// The subprotocol the server selected (`Sec-WebSocket-Protocol`), if any.
    public let subprotocol: String?

    init(core: ConnectionCore, subprotocol: String?) {
        self.core = core
        self.subprotocol = subprotocol
    }

    deinit {
        core.abort()
    }

    /// Sends one text message (masked, RFC 6455 §5.3) and returns once the socket thread has
    /// written it to the kernel. A send once queued is not withdrawn by cancelling its task.
    public func send(_ text: String) async throws(TransportError) {
        let frame = FrameEncoder.frame(opcode: .text, payload: Array(text.utf8), maskKey: SecureRandom.uint32())
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, TransportError>, Never>) in
            if let refused = core.enqueue(frame, continuation) {
                continuation.resume(returning: .failure(refused))
            }
        }
        try result.get()
    }

    /// The next text message, in order. After the connection ended, the messages that arrived
    /// before its end, then the error that ended it: ``TransportError/closed(code:reason:)`` (a
    /// close frame without a code reads as 1005, RFC 6455 §7.1.5; a connection lost without one
    /// as `nil`) or ``TransportError/protocolViolation(_:)`` (the server broke RFC 6455 and this
    /// side failed the connection with the code the text starts with).
    ///
    /// A cancelled `receive()` throws `closed(code: nil, reason: "receive cancelled")` and takes
    /// no message: the connection itself goes on.
    public func receive() async throws(TransportError) -> String {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, TransportError>, Never>) in
                if let now = core.takeMessage(orWait: continuation) {
                    continuation.resume(returning: now)
                }
            }
        } onCancel: {
            core.cancelReceive()
        }
        return try result.get()
    }

    /// The closing handshake (RFC 6455 §7.1.2): sends a close frame with `code` (1000 for a code
    /// an endpoint may not send) and `reason` (cut to 123 bytes), waits for the server's close
    /// and for the end of the TCP connection, at most ``SocketTransport/Options/closeTimeout``,
    /// then closes the socket. Idempotent: a second call waits for the same end.
    public func close(code: UInt16, reason: String) async {
        let sendable = CloseCode.isValidReceived(code) ? code : CloseCode.normal.rawValue
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !core.requestClose(code: sendable, reason: reason, continuation) {
                continuation.resume()
            }
        }
    }

    /// Cuts the TCP connection at once, without a closing handshake (a phone leaving coverage):
    /// the server sees the connection end without a close frame. `receive()` then ends with
    /// `closed(code: nil, reason: "aborted")`. For tests and for an app that knows the network
    /// is gone.
    public func abort() {
        core.abort()
    }
}

/// What the async side and the socket thread share: one mutex over the state below, and the
/// write end of the thread's wake pipe.
///
/// Invariant: the wake pipe is written only under the lock and only while `finished` is false;
/// the thread sets `finished` under the lock before it closes the pipe, so no write ever reaches
/// a closed (or reused) descriptor.
final class ConnectionCore: Sendable {
    struct Outgoing {
        var frame: [UInt8]
        var continuation: CheckedContinuation<Result<Void, TransportError>, Never>
    }

    struct State {
        /// Messages received and not yet taken, oldest at `inboxHead`.
        var inbox: [String] = []
        var inboxHead = 0
        /// Their size as counted against the receive buffer limit.
        var inboxBytes = 0
        var receiver: CheckedContinuation<Result<String, TransportError>, Never>?
        /// Frames for the thread to take, in order.
        var outgoing: [Outgoing] = []
        var closeRequest: (code: UInt16, reason: String)?
        var closeTaken = false
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var aborted = false
        /// Why the connection ended, once it did (or once its end is decided): what `receive`
        /// throws after the inbox is empty, and what `send` throws.
        var ended: TransportError?
        /// The thread is done and the socket closed.
        var finished = false
        /// The thread stopped reading for want of room; a `receive` that makes room wakes it.
        var readPaused = false
    }

    let state = Mutex(State())
    let wakeFD: Int32
    let receiveBufferBytes: Int
    /// Called on the socket thread with each ping's payload once its pong is queued (tests).
    let pingObserver: (@Sendable ([UInt8]) -> Void)?

    init(wakeFD: Int32, receiveBufferBytes: Int, pingObserver: (@Sendable ([UInt8]) -> Void)?) {
        self.wakeFD = wakeFD
        self.receiveBufferBytes = receiveBufferBytes
        self.pingObserver = pingObserver
    }

    /// What a message counts against the receive buffer: its bytes and a little for its slot.
    static func cost(_ text: String) -> Int { text.utf8.count + 64 }

    // MARK: the async side

    /// Queues a frame, or says why it cannot be sent.
    func enqueue(_ frame: [UInt8], _ continuation: CheckedContinuation<Result<Void, TransportError>, Never>) -> TransportError? {
        state.withLock { s in
            if let ended = s.ended { return ended }
            if s.closeRequest != nil || s.aborted { return .closed(code: nil, reason: "the connection is closing") }
            s.outgoing.append(Outgoing(frame: frame, continuation: continuation))
            wakeLocked(s)
            return nil
        }
    }

    /// The next message or the end, or nil after installing `continuation` as the waiter.
    func takeMessage(orWait continuation: CheckedContinuation<Result<String, TransportError>, Never>) -> Result<String, TransportError>? {
        state.withLock { s in
            if s.inboxHead < s.inbox.count {
                let text = s.inbox[s.inboxHead]
                s.inboxHead += 1
                s.inboxBytes -= Self.cost(text)
                if s.inboxHead == s.inbox.count {
                    s.inbox.removeAll(keepingCapacity: s.inbox.count <= 64)
                    s.inboxHead = 0
                } else if s.inboxHead >= 1024 && s.inboxHead * 2 >= s.inbox.count {
                    s.inbox.removeFirst(s.inboxHead)
                    s.inboxHead = 0
                }
                // Half the buffer free again: let the thread read on.
                if s.readPaused && s.inboxBytes <= receiveBufferBytes / 2 {
                    s.readPaused = false
                    wakeLocked(s)
                }
                return .success(text)
            }
            if let ended = s.ended { return .failure(ended) }
            if s.receiver != nil { return .failure(.closed(code: nil, reason: "receive() called by two readers at once")) }
            // Checked under the lock: a cancellation handler that ran before this found no waiter.
            if Task.isCancelled { return .failure(.closed(code: nil, reason: "receive cancelled")) }
            s.receiver = continuation
            return nil
        }
    }

    func cancelReceive() {
        let waiter = state.withLock { s in
            defer { s.receiver = nil }
            return s.receiver
        }
        waiter?.resume(returning: .failure(.closed(code: nil, reason: "receive cancelled")))
    }

    /// Records the close request (the first one's code and reason win) and the waiter; false when
    /// the connection is already finished.
    func requestClose(code: UInt16, reason: String, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        state.withLock { s in
            if s.finished { return false }
            if s.closeRequest == nil { s.closeRequest = (code, reason) }
            s.closeWaiters.append(continuation)
            wakeLocked(s)
            return true
        }
    }

    func abort() {
        state.withLock { s in
            guard !s.finished, !s.aborted else { return }
            s.aborted = true
            wakeLocked(s)
        }
    }

    /// Whether the connect was abandoned (the timeout or a cancellation) while the thread opened it.
    func takeAbortedDuringConnect() -> Bool {
        state.withLock { $0.aborted }
    }

    private func wakeLocked(_ s: State) {
        guard !s.finished else { return }
        var byte: UInt8 = 1
        // Non-blocking: a full pipe already holds a wake-up.
        _ = write(wakeFD, &byte, 1)
    }

    // MARK: the socket thread's side

    /// What the thread is asked to do.
    struct Requests {
        var frames: [Outgoing] = []
        var close: (code: UInt16, reason: String)?
        var aborted = false
        var readPaused = false
    }

    func takeRequests() -> Requests {
        state.withLock { s in
            var r = Requests()
            swap(&r.frames, &s.outgoing)
            if !s.closeTaken, let close = s.closeRequest {
                s.closeTaken = true
                r.close = close
            }
            r.aborted = s.aborted
            r.readPaused = s.readPaused
            return r
        }
    }

    /// Hands a message to the reader. Returns whether the thread must stop reading for now.
    func deliver(_ text: String) -> Bool {
        let (waiter, paused): (CheckedContinuation<Result<String, TransportError>, Never>?, Bool) = state.withLock { s in
            if let receiver = s.receiver, s.inboxHead == s.inbox.count {
                s.receiver = nil
                return (receiver, false)
            }
            s.inbox.append(text)
            s.inboxBytes += Self.cost(text)
            if s.inboxBytes >= receiveBufferBytes { s.readPaused = true }
            return (nil, s.readPaused)
        }
        waiter?.resume(returning: .success(text))
        return paused
    }

    /// Decides how the connection ends (the first decision stands) and tells a waiting reader
    /// once the inbox is empty.
    func publishEnd(_ end: TransportError) {
        let waiter = state.withLock { s -> CheckedContinuation<Result<String, TransportError>, Never>? in
            if s.ended == nil { s.ended = end }
            guard s.inboxHead == s.inbox.count, let receiver = s.receiver else { return nil }
            s.receiver = nil
            return receiver
        }
        waiter?.resume(returning: .failure(end))
    }

    /// The thread is done: everyone still waiting is answered, and the wake pipe may be closed.
    func finish(_ end: TransportError) {
        publishEnd(end)
        let (frames, closers, final) = state.withLock { s in
            s.finished = true
            defer {
                s.outgoing = []
                s.closeWaiters = []
            }
            return (s.outgoing, s.closeWaiters, s.ended ?? end)
        }
        for frame in frames { frame.continuation.resume(returning: .failure(final)) }
        for closer in closers { closer.resume() }
    }

    /// Empties the wake pipe (its bytes only say "look at the state").
    static func drainWakePipe(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(fd, &buffer, buffer.count) > 0 {}
    }
}
#endif
