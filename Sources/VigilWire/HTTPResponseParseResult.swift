/// What `HTTPResponseParser.feed` found.
public enum HTTPResponseParseResult {
    /// The head is not complete yet.
    case needMore
    /// The head is complete; `leftover` counts the bytes at the end of the last fed
    /// chunk that follow it (e.g. the server's first frames).
    case complete(HTTPResponseHead, leftover: Int)
    /// The response head is malformed or too large.
    case failure(String)
}
