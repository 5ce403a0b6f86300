import VigilBytes
import VigilLoop
import VigilWire

/// Where a complete request head goes: a plain HTTP answer, or a WebSocket upgrade to an application.
extension Server {
    enum Route {
        case respond(HTTPResponse)
        /// A response whose body is a shared chunk (a web page's asset), sent after its head.
        case respondShared(HTTPResponse, ByteChunk)
        case upgrade(UpgradeRequest, any WebSocketApplication)
    }

    func route(_ head: HTTPRequestHead) -> Route {
        let path = head.path
        if path == "/healthz" {
            guard head.method == "GET" || head.method == "HEAD" else {
                return .respond(HTTPResponse(status: .methodNotAllowed, headers: [("Allow", "GET, HEAD")], body: Array("use GET\n".utf8), contentType: "text/plain; charset=utf-8"))
            }
            return .respond(publicHealth(head))
        }
        if let site, let answer = site.answer(head) {
            if let body = answer.body { return .respondShared(answer.head, body) }
            return .respond(answer.head)
        }
        guard let application = application(at: path) else {
            return .respond(HTTPResponse(status: .notFound, body: Array("no such endpoint: try /v1 (WebSocket) or /healthz\n".utf8), contentType: "text/plain; charset=utf-8"))
        }
        switch Handshake.validate(head, supportedSubprotocols: path == "/v1" ? ["vigil.v1"] : []) {
        case .success(let upgrade): return .upgrade(upgrade, application)
        case .failure(let error): return .respond(error.response())
        }
    }
}
