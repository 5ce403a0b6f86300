import VigilWire

/// A server connection's life as a value: which phase it is in, what each event does to it, and
/// what the connection must do about it.
///
/// Phases: `http` (reading the request head) → `open` (WebSocket) → `closeSent` (we sent a close
/// and wait for the peer's) → `draining` (nothing more to send: once the queued output is out the
/// write side is shut, and input is discarded until EOF or the close timeout; closing with unread
/// input would make the kernel send RST, which can destroy our last frame) → `closed`. A plain
/// HTTP response goes straight from `http` to `draining`.
///
/// Each transition returns `Actions` and does no I/O; `Connection` executes them in order. The
/// keep-alive rule lives here too: any input counts as liveness; after `pingIntervalMs` of
/// silence the server pings, and if `pongTimeoutMs` then passes still silent the client is
/// dropped. Every phase has exactly one deadline (handshake, next keep-alive check, or close
/// timeout), returned as `.armTimer`.
///
/// 10 bytes of state: it lives in every connection.
public struct ConnectionLifecycle: Equatable, Sendable {
    public enum Phase: UInt8, Sendable {
        case http, open, closeSent, draining, closed
    }

    /// The server's timeouts, passed to each transition (kept once per server, not per connection).
    public struct Timeouts: Equatable, Sendable {
        public var handshakeMs: Int64
        public var pingIntervalMs: Int64
        public var pongTimeoutMs: Int64
        public var closeTimeoutMs: Int64

        public init(handshakeMs: Int64, pingIntervalMs: Int64, pongTimeoutMs: Int64, closeTimeoutMs: Int64) {
            self.handshakeMs = handshakeMs
            self.pingIntervalMs = pingIntervalMs
            self.pongTimeoutMs = pongTimeoutMs
            self.closeTimeoutMs = closeTimeoutMs
        }
    }

    /// One thing the connection must do.
    public enum Action: Equatable, Sendable {
        /// Replace the connection's deadline: `timerFired` is due at this time.
        case armTimer(atMs: Int64)
        /// Answer the unfinished request with 408 Request Timeout.
        case respondTimeout
        case sendPing
        case sendPong([UInt8])
        /// A close frame: with this code and reason, or empty when `code` is nil (the echo of a
        /// close that carried no code, RFC 6455 §5.5.1).
        case sendClose(code: CloseCode?, reason: String)
        /// The WebSocket session is over: the application hears `closed`, and nothing more is
        /// sent on its behalf.
        case endApplication
        /// Shut the write side once everything queued so far has reached the kernel.
        case shutWrite
        /// Close the socket now.
        case drop
    }

    /// The actions of one transition, in order (at most four; no allocation).
    public struct Actions: Sequence, Equatable, Sendable {
        private var a: Action?, b: Action?, c: Action?, d: Action?

        public init(_ actions: Action...) {
            precondition(actions.count <= 4)
            a = actions.count > 0 ? actions[0] : nil
            b = actions.count > 1 ? actions[1] : nil
            c = actions.count > 2 ? actions[2] : nil
            d = actions.count > 3 ? actions[3] : nil
        }

        public static let none = Actions()

        public struct Iterator: IteratorProtocol {
            fileprivate var rest: Actions
            public mutating func next() -> Action? {
                let first = rest.a
                rest.a = rest.b
                rest.b = rest.c
                rest.c = rest.d
                rest.d = nil
                return first
            }
        }

        public func makeIterator() -> Iterator { Iterator(rest: self) }

        public var isEmpty: Bool { a == nil }
    }

    // The times are the low 32 bits of the monotonic clock's milliseconds (`clock32`): every
    // deadline computed from them is at most two hours away (the config bounds each timeout at
    // one), far inside the ±24 days that a 32-bit difference measures exactly. 16 bytes saved
    // per connection against two Int64 (the connection object 176 -> 168, malloc's 192 -> 176).
    private var lastInput: UInt32
    /// When the outstanding ping was sent, if `pingOutstanding` (input clears it).
    private var pingSentAt: UInt32 = 0
    private var pingOutstanding = false
    /// Last, so that the value's size is 10 bytes, not 16: the connection's small fields follow
    /// it in the bytes its alignment would otherwise leave empty.
    public private(set) var phase: Phase = .http

    /// A connection just accepted, and its handshake deadline.
    public static func accepted(nowMs: Int64, _ t: Timeouts) -> (ConnectionLifecycle, Actions) {
        (ConnectionLifecycle(lastInput: clock32(nowMs)), Actions(.armTimer(atMs: nowMs + t.handshakeMs)))
    }

    private init(lastInput: UInt32) {
        self.lastInput = lastInput
    }

    /// The low 32 bits of a monotonic millisecond time.
    private static func clock32(_ ms: Int64) -> UInt32 { UInt32(truncatingIfNeeded: ms) }

    /// `nowMs` minus a time kept in 32 bits: exact for differences within ±24 days (a clock
    /// that went back gives a negative one, as the 64-bit subtraction did).
    private static func elapsed(since t: UInt32, nowMs: Int64) -> Int64 {
        Int64(Int32(bitPattern: clock32(nowMs) &- t))
    }

    /// Whether frames are read (and control frames answered): open, or waiting for the peer's close.
    public var readsFrames: Bool { phase == .open || phase == .closeSent }
    /// Whether the application may send.
    public var isOpen: Bool { phase == .open }

    // MARK: events

    /// Bytes arrived: the client is alive.
    public mutating func input(nowMs: Int64) {
        lastInput = Self.clock32(nowMs)
        pingOutstanding = false
    }

    /// The 101 was queued: the WebSocket is open, and the keep-alive clock starts.
    public mutating func upgraded(nowMs: Int64, _ t: Timeouts) -> Actions {
        guard phase == .http else { return .none }
        phase = .open
        return Actions(.armTimer(atMs: nowMs + t.pingIntervalMs))
    }

    /// A final HTTP response was queued: nothing more will be sent. The connection goes after the
    /// close timeout, plus the handshake timeout when the response has a body to deliver (a web
    /// page's asset, which a phone on a slow network needs seconds to read).
    public mutating func responded(nowMs: Int64, _ t: Timeouts, withBody: Bool = false) -> Actions {
        guard phase == .http else { return .none }
        phase = .draining
        return Actions(.shutWrite, .armTimer(atMs: nowMs + t.closeTimeoutMs + (withBody ? t.handshakeMs : 0)))
    }

    public mutating func pingReceived(_ payload: [UInt8]) -> Actions {
        phase == .open ? Actions(.sendPong(payload)) : .none
    }

    /// The peer's close frame: echoed when it opened the handshake (its code, §5.5.1); the end
    /// of the handshake when we opened it.
    public mutating func closeReceived(code: UInt16?, nowMs: Int64, _ t: Timeouts) -> Actions {
        switch phase {
        case .open:
            phase = .draining
            return Actions(.sendClose(code: code.map(CloseCode.init(rawValue:)), reason: ""), .endApplication,
                           .shutWrite, .armTimer(atMs: nowMs + t.closeTimeoutMs))
        case .closeSent:
            phase = .draining
            return Actions(.endApplication, .shutWrite, .armTimer(atMs: nowMs + t.closeTimeoutMs))
        case .http, .draining, .closed:
            return .none
        }
    }

    /// The peer broke RFC 6455: close with the error's code (1002, 1007, 1009) and stop reading frames.
    public mutating func protocolViolation(_ error: WireError, nowMs: Int64, _ t: Timeouts) -> Actions {
        switch phase {
        case .open:
            phase = .draining
            return Actions(.sendClose(code: error.closeCode, reason: error.reason), .endApplication,
                           .shutWrite, .armTimer(atMs: nowMs + t.closeTimeoutMs))
        case .closeSent:
            // Our close is out already; the handshake cannot complete cleanly.
            phase = .draining
            return Actions(.endApplication, .shutWrite, .armTimer(atMs: nowMs + t.closeTimeoutMs))
        case .http, .draining, .closed:
            return .none
        }
    }

    /// The server closes (a policy, or shutdown): send close and wait for the peer's.
    public mutating func closeRequested(_ code: CloseCode, reason: String, nowMs: Int64, _ t: Timeouts) -> Actions {
        guard phase == .open else { return .none }
        phase = .closeSent
        return Actions(.sendClose(code: code, reason: reason), .armTimer(atMs: nowMs + t.closeTimeoutMs))
    }

    /// The deadline armed last has passed. `canRespond` is false while a TLS handshake is
    /// unfinished: no HTTP response can reach that client, so it is dropped instead.
    public mutating func timerFired(nowMs: Int64, _ t: Timeouts, canRespond: Bool = true) -> Actions {
        switch phase {
        case .http:
            guard canRespond else {
                phase = .closed
                return Actions(.drop)
            }
            phase = .draining
            return Actions(.respondTimeout, .shutWrite, .armTimer(atMs: nowMs + t.closeTimeoutMs))
        case .open:
            if pingOutstanding {
                let dropAt = nowMs - Self.elapsed(since: pingSentAt, nowMs: nowMs) + t.pongTimeoutMs
                if nowMs < dropAt { return Actions(.armTimer(atMs: dropAt)) }
                phase = .closed
                return Actions(.endApplication, .drop)
            }
            let pingAt = nowMs - Self.elapsed(since: lastInput, nowMs: nowMs) + t.pingIntervalMs
            if nowMs < pingAt { return Actions(.armTimer(atMs: pingAt)) }
            pingSentAt = Self.clock32(nowMs)
            pingOutstanding = true
            return Actions(.sendPing, .armTimer(atMs: nowMs + t.pongTimeoutMs))
        case .closeSent:
            phase = .closed
            return Actions(.endApplication, .drop)
        case .draining:
            phase = .closed
            return Actions(.drop)
        case .closed:
            return .none
        }
    }

    /// The peer is gone (EOF, reset, or an I/O error), or the server drops the connection without
    /// a handshake (a slow consumer, the end of the shutdown grace). 1006 for the peer: nothing is sent.
    public mutating func gone() -> Actions {
        switch phase {
        case .open, .closeSent:
            phase = .closed
            return Actions(.endApplication, .drop)
        case .http, .draining:
            phase = .closed
            return Actions(.drop)
        case .closed:
            return .none
        }
    }
}
