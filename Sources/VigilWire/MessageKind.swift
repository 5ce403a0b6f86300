/// The type of a data message, fixed by the opcode of its first frame (RFC 6455 §5.6).
public enum MessageKind: Equatable, Sendable {
    case text
    case binary
}
