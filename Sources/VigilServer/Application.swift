import VigilWire

/// What runs behind a WebSocket endpoint. Called on the loop thread only; implementations send
/// through the `Connection` they are handed and never touch sockets.
public protocol WebSocketApplication: AnyObject {
    /// The handshake completed on this application's path.
    func opened(_ connection: Connection)
    /// A complete, validated message (text is valid UTF-8). `payload` is valid only during the call.
    func received(_ connection: Connection, kind: MessageKind, payload: UnsafeRawBufferPointer)
    /// The connection's WebSocket session is over (a close handshake, a timeout, an error, or a
    /// policy). No more sends. Called from event handling, from the fan-out (a consumer dropped by
    /// its send policy) or from the flush (a failed write): it may record what changed, but must
    /// not send or fan out itself.
    func closed(_ connection: Connection)
    /// The end of each loop turn, before the flush: send what the turn produced.
    func endOfTurn()
    /// The connection's output queue drained, as asked with `Connection.notifyWhenDrained()`.
    /// Called from the flush: it may record that, and ask for another turn to send more.
    func drained(_ connection: Connection)
}

extension WebSocketApplication {
    public func endOfTurn() {}
    public func drained(_ connection: Connection) {}
}

/// `/echo`: every message goes back as it came. For the conformance suite; off in production.
public final class EchoApplication: WebSocketApplication {
    public init() {}
    public func opened(_ connection: Connection) {}
    public func received(_ connection: Connection, kind: MessageKind, payload: UnsafeRawBufferPointer) {
        connection.send(kind == .text ? .text : .binary, payload: payload)
    }
    public func closed(_ connection: Connection) {}
}
