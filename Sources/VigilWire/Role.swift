/// Which side of the connection a reader decodes for; it decides the masking rule
/// of RFC 6455 §5.1 (client-to-server frames are masked, server-to-client are not).
public enum Role: Sendable {
    /// We are the server: every frame we receive must be masked.
    case server
    /// We are the client: every frame we receive must be unmasked.
    case client
}
