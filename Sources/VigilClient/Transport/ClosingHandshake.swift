#if os(Linux)
import VigilWire

/// The client's side of a connection's end (RFC 6455 §7) as a value: each event returns the
/// actions the socket thread carries out, so the rules are tested without a socket
/// (ClosingHandshakeTests) and `SocketEngine` holds no flag of its own about closing.
///
/// - The app closes: our close frame goes out, and the server's is awaited until the deadline.
/// - The server closes: its code is echoed (an empty close for none: 1005 is never sent), and
///   the end is reported with its code (1005 when it had none).
/// - The server breaks the protocol: the connection is failed (§7.1.7) with the breach's code,
///   unless our close frame is out already (a second one may not follow, §5.5.1).
/// - Once the end is decided our close frame is written, our side shut for writing, and what
///   arrives is read and dropped until the server closes or the deadline passes ("lingering"):
///   closing a socket with unread input sends a reset, which can destroy the close frame before
///   the server reads it.
struct ClosingHandshake: Equatable {
    enum Phase: Equatable {
        case open
        /// Our close frame is queued or out; waiting for the server's until the deadline.
        case closing(deadlineMs: UInt64)
        /// The end is decided; waiting for the server to end the TCP connection.
        case lingering(deadlineMs: UInt64)
        case ended
    }

    enum Action: Equatable {
        /// Queue a close frame with this payload.
        case sendClose([UInt8])
        /// Tell the reader how the connection ends (after the messages before it).
        case report(TransportError)
        /// Everything queued is written: shut our side for writing (TLS: close_notify first).
        case shutWrite
        /// Close the socket and answer everyone with this end.
        case end(TransportError)
    }

    private(set) var phase = Phase.open
    /// How the end is reported, once decided: the first decision stands.
    private(set) var report: TransportError?
    private var closeSent = false
    private var writeShut = false
    let timeoutMs: UInt64

    init(timeoutMs: UInt64) {
        self.timeoutMs = timeoutMs
    }

    /// Data messages are delivered and pings answered only while open.
    var isOpen: Bool { phase == .open }

    var deadlineMs: UInt64? {
        switch phase {
        case .closing(let d), .lingering(let d): return d
        case .open, .ended: return nil
        }
    }

    /// `close(code:reason:)` from the app.
    mutating func closeRequested(code: UInt16, reason: String, nowMs: UInt64) -> [Action] {
        guard phase == .open else { return [] }
        closeSent = true
        phase = .closing(deadlineMs: nowMs + timeoutMs)
        return [.sendClose(FrameEncoder.closePayload(code: CloseCode(rawValue: code), reason: reason))]
    }

    /// The server's close frame (`code` nil when it carried none).
    mutating func closeReceived(code: UInt16?, reason: String, nowMs: UInt64) -> [Action] {
        var actions = decide(.closed(code: code ?? CloseCode.noStatus.rawValue, reason: reason))
        switch phase {
        case .open:
            closeSent = true
            actions.insert(.sendClose(code.map { FrameEncoder.closePayload(code: CloseCode(rawValue: $0), reason: "") } ?? []), at: 0)
            phase = .lingering(deadlineMs: nowMs + timeoutMs)
        case .closing(let deadline):
            phase = .lingering(deadlineMs: deadline)
        case .lingering, .ended:
            break
        }
        return actions
    }

    /// The server broke RFC 6455 (or sent what this client does not take, 1003): fail the
    /// connection with `code`.
    mutating func violated(code: CloseCode, reason: String, nowMs: UInt64) -> [Action] {
        guard phase != .ended else { return [] }
        var actions = decide(.protocolViolation("\(code.rawValue) \(reason)"))
        if !closeSent {
            closeSent = true
            actions.insert(.sendClose(FrameEncoder.closePayload(code: code, reason: reason)), at: 0)
        }
        switch phase {
        case .open: phase = .lingering(deadlineMs: nowMs + timeoutMs)
        case .closing(let deadline): phase = .lingering(deadlineMs: deadline)
        case .lingering, .ended: break
        }
        return actions
    }

    /// Everything queued has been written to the socket.
    mutating func outputFlushed() -> [Action] {
        guard case .lingering = phase, !writeShut else { return [] }
        writeShut = true
        return [.shutWrite]
    }

    /// The server ended the TCP connection (or TLS with close_notify).
    mutating func inputEnded() -> [Action] {
        switch phase {
        case .open: return finish(.closed(code: nil, reason: "connection lost"))
        case .closing: return finish(.closed(code: nil, reason: "the server closed the connection without answering the close"))
        case .lingering: return finish(.closed(code: nil, reason: "connection lost"))
        case .ended: return []
        }
    }

    /// A read or write failed (a reset, for one).
    mutating func ioFailed(_ why: String) -> [Action] {
        finish(.closed(code: nil, reason: why))
    }

    /// Time passed: the end at the deadline.
    mutating func tick(nowMs: UInt64) -> [Action] {
        guard let deadline = deadlineMs, nowMs >= deadline else { return [] }
        return finish(.closed(code: nil, reason: "no close frame from the server within the close timeout"))
    }

    /// `abort()`: the socket closes now, no close frame.
    mutating func aborted() -> [Action] {
        finish(.closed(code: nil, reason: "aborted"))
    }

    private mutating func decide(_ end: TransportError) -> [Action] {
        guard report == nil else { return [] }
        report = end
        return [.report(end)]
    }

    /// The end: the decided report if there is one, else `fallback`.
    private mutating func finish(_ fallback: TransportError) -> [Action] {
        guard phase != .ended else { return [] }
        phase = .ended
        return [.end(report ?? fallback)]
    }
}
#endif
