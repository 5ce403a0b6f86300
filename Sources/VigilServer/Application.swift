import VigilWire

/// What runs behind a WebSocket endpoint. Called on the loop thread only; implementations send
/// through the `Connection` they are handed and never touch sockets.
public protocol WebSocketApplication: AnyObject {
    /// The handshake completed on `path`.
    func opened(_ connection: Connection)
    /// A complete, validated message (text is valid UTF-8). `payload` is valid only during the call.
    func received(_ connection: Connection, kind: MessageKind, payload: UnsafeRawBufferPointer)
    /// The connection is gone (after a close handshake, a timeout or an error). No more sends.
    func closed(_ connection: Connection)
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

/// `/v1` before any operation is defined: it holds the connection open and answers each message
/// with the protocol's error envelope, so a client sees a clear answer instead of silence.
public final class UnknownOperationApplication: WebSocketApplication {
    private let reply: [UInt8] = Array(#"{"type":"error","code":"unknown_op","message":"this server defines no operations yet"}"#.utf8)
    public init() {}
    public func opened(_ connection: Connection) {}
    public func received(_ connection: Connection, kind: MessageKind, payload: UnsafeRawBufferPointer) {
        reply.withUnsafeBytes { connection.send(.text, payload: $0) }
    }
    public func closed(_ connection: Connection) {}
}
