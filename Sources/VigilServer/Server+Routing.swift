import VigilLoop
import VigilWire

/// Where a complete request head goes: a plain HTTP answer, or a WebSocket upgrade to an application.
extension Server {
    enum Route {
        case respond(HTTPResponse)
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
        if let site, let response = site.respond(head) { return .respond(response) }
        guard let application = application(at: path) else {
            return .respond(HTTPResponse(status: .notFound, body: Array("no such endpoint: try /v1 (WebSocket) or /healthz\n".utf8), contentType: "text/plain; charset=utf-8"))
        }
        switch Handshake.validate(head, supportedSubprotocols: path == "/v1" ? ["vigil.v1"] : []) {
        case .success(let upgrade): return .upgrade(upgrade, application)
        case .failure(let error): return .respond(error.response())
        }
    }
}
