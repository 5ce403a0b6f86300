/// What `HTTPRequestParser.feed` found.
public enum HTTPParseResult {
    /// The head is not complete yet; every byte given was kept.
    case needMore
    /// The head is complete. `leftover` counts the bytes at the end of the last fed
    /// chunk that follow the head (e.g. a WebSocket frame pipelined after the request).
    case complete(HTTPRequestHead, leftover: Int)
    /// The request is malformed (400) or too large (431); `String` says why.
    case failure(HTTPStatus, String)
}
