import VigilBytes
import VigilWire

/// One file the web pages are made of, held in memory from start-up.
public struct StaticAsset: Equatable, Sendable {
    /// The URL path it is served at (`/watch.js`, `/vendor/leaflet/leaflet.css`).
    public var path: String
    public var body: [UInt8]
    public var contentType: String
    /// A strong validator: a hash of the body, quoted (RFC 9110 §8.8.3).
    public var etag: String

    public init(path: String, body: [UInt8], contentType: String) {
        self.path = path
        self.body = body
        self.contentType = contentType
        self.etag = "\"" + Crypto.sha256(body).prefix(12).map { byte in
            let hex = Array("0123456789abcdef".utf8)
            return String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
        }.joined() + "\""
    }
}

/// The pages vigild serves (`web.enabled`): a fixed table of assets read at start-up, so a request
/// can only ever name one of them. There is nothing to traverse and nothing to list: a path is
/// looked up as it is, byte for byte, and anything else is not ours (404 from the router).
///
/// Every answer carries a strict Content-Security-Policy (scripts, styles and connections only from
/// the same origin; images also from the tile server), `nosniff`, `no-referrer` (the watch page's
/// capability stays in its URL fragment, which browsers never send, and no Referer leaks the page),
/// and an ETag with `Cache-Control: no-cache`, so a browser revalidates and gets 304 while nothing changed.
///
/// The server sends a body from one shared, immutable chunk per asset (`answer`), queued by
/// reference, so that many clients fetching Leaflet at once (or not reading it) hold no copy each.
public struct StaticSite {
    public private(set) var assets: [String: StaticAsset] = [:]
    private var chunks: [String: ByteChunk] = [:]
    public let contentSecurityPolicy: String

    /// `imageSources`: CSP sources images may also come from (the tile server's origin).
    public init(assets: [StaticAsset], imageSources: [String] = []) {
        for asset in assets {
            self.assets[asset.path] = asset
            chunks[asset.path] = asset.body.withUnsafeBytes { ByteChunk(copying: $0) }
        }
        let images = (["'self'", "data:"] + imageSources).joined(separator: " ")
        contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src \(images); "
            + "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    }

    /// The MIME types of what may be served, by file extension; other files are never loaded.
    public static let contentTypes: [String: String] = [
        "html": "text/html; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "mjs": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "json": "application/json",
        "png": "image/png",
        "svg": "image/svg+xml",
        "ico": "image/x-icon",
        "txt": "text/plain; charset=utf-8",
        "webmanifest": "application/manifest+json",
    ]

    public static func contentType(forFileName name: String) -> String? {
        guard let dot = name.utf8.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        return contentTypes[String(name[name.utf8.index(after: dot)...]).lowercased()]
    }

    /// The asset a request path names: itself, `/NAME` for `/NAME.html` (the pages: `/watch`, `/map`,
    /// `/panic`), `/` for `/index.html`. A directory, an encoded or a dotted path names nothing.
    public func asset(at path: String) -> StaticAsset? {
        if let exact = assets[path] { return exact }
        if path == "/" { return assets["/index.html"] }
        guard !path.hasSuffix("/"), !path.contains("."), let page = assets[path + ".html"] else { return nil }
        return page
    }

    /// The answer to a request for one of the assets, or nil when the path names none of them.
    public func respond(_ head: HTTPRequestHead) -> HTTPResponse? {
        guard let asset = asset(at: head.path) else { return nil }
        var headers: [(String, String)] = [
            ("ETag", asset.etag),
            ("Cache-Control", "no-cache"),
            ("Content-Security-Policy", contentSecurityPolicy),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cross-Origin-Opener-Policy", "same-origin"),
            ("Cross-Origin-Resource-Policy", "same-origin"),
        ]
        guard head.method == "GET" || head.method == "HEAD" else {
            headers.append(("Allow", "GET, HEAD"))
            return HTTPResponse(status: .methodNotAllowed, headers: headers, body: Array("use GET\n".utf8),
                                contentType: "text/plain; charset=utf-8")
        }
        if Self.matches(head.values("if-none-match"), asset.etag) {
            return HTTPResponse(status: .notModified, headers: headers, body: [], contentLength: asset.body.count)
        }
        if head.method == "HEAD" {
            return HTTPResponse(status: .ok, headers: headers, body: [], contentType: asset.contentType, contentLength: asset.body.count)
        }
        return HTTPResponse(status: .ok, headers: headers, body: asset.body, contentType: asset.contentType)
    }

    /// What the server sends: the response, and for a body the asset's shared chunk, to be queued
    /// after the response's head (whose Content-Length names it).
    public func answer(_ head: HTTPRequestHead) -> (head: HTTPResponse, body: ByteChunk?)? {
        guard var response = respond(head) else { return nil }
        guard response.status == .ok, !response.body.isEmpty, let asset = asset(at: head.path), let chunk = chunks[asset.path] else {
            return (response, nil)
        }
        response.contentLength = response.body.count
        response.body = []
        return (response, chunk)
    }

    /// If-None-Match (RFC 9110 §13.1.2): `*`, or a list of entity tags compared weakly.
    static func matches(_ fields: [String], _ etag: String) -> Bool {
        for field in fields {
            for raw in field.split(separator: ",") {
                var tag = raw.trimmingSpaces
                if tag == "*" { return true }
                if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
                if tag == etag { return true }
            }
        }
        return false
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
