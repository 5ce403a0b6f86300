import Foundation
import Testing
import VigilWire
@testable import VigilServer

@Suite struct StaticSiteTests {
    static let page = StaticAsset(path: "/watch.html", body: Array("<!doctype html><title>watch</title>".utf8), contentType: "text/html; charset=utf-8")
    static let script = StaticAsset(path: "/vigil/client.js", body: Array("export const x = 1;\n".utf8), contentType: "text/javascript; charset=utf-8")
    static let index = StaticAsset(path: "/index.html", body: Array("<!doctype html><title>vigil</title>".utf8), contentType: "text/html; charset=utf-8")
    static let css = StaticAsset(path: "/vendor/leaflet/leaflet.css", body: Array(".leaflet{}".utf8), contentType: "text/css; charset=utf-8")
    let site = StaticSite(assets: [page, script, index, css], imageSources: ["https://tile.openstreetmap.org"])

    func get(_ target: String, method: String = "GET", headers: [(name: String, value: String)] = []) -> HTTPResponse? {
        site.respond(HTTPRequestHead(method: method, target: target, versionMajor: 1, versionMinor: 1, headers: [("Host", "x")] + headers))
    }

    func header(_ r: HTTPResponse, _ name: String) -> String? {
        r.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    @Test func anAssetIsServedWithItsTypeValidatorAndPolicies() throws {
        let r = try #require(get("/vigil/client.js"))
        #expect(r.status == .ok)
        #expect(r.body == Self.script.body)
        #expect(r.contentType == "text/javascript; charset=utf-8")
        #expect(header(r, "ETag") == Self.script.etag)
        #expect(Self.script.etag.hasPrefix("\"") && Self.script.etag.hasSuffix("\"") && Self.script.etag.count == 26)
        #expect(Self.script.etag != Self.page.etag)
        #expect(header(r, "Cache-Control") == "no-cache")
        #expect(header(r, "X-Content-Type-Options") == "nosniff")
        #expect(header(r, "Referrer-Policy") == "no-referrer")
        let csp = try #require(header(r, "Content-Security-Policy"))
        #expect(csp.hasPrefix("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https://tile.openstreetmap.org;"))
        #expect(csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'") && csp.contains("base-uri 'none'"))
        #expect(!csp.contains("unsafe"))
        // The serialized response frames exactly the body.
        let text = String(decoding: r.serialize(), as: UTF8.self)
        #expect(text.contains("Content-Length: \(Self.script.body.count)\r\n"))
    }

    @Test func theServerSendsABodyFromOneSharedChunkPerAsset() throws {
        let head = HTTPRequestHead(method: "GET", target: "/watch", versionMajor: 1, versionMinor: 1, headers: [])
        let first = try #require(site.answer(head))
        let second = try #require(site.answer(head))
        let chunk = try #require(first.body)
        #expect(chunk === second.body, "the same chunk for every request")
        #expect(Array(chunk.bytes) == Self.page.body)
        #expect(first.head.body.isEmpty)
        let text = String(decoding: first.head.serialize(), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n") && text.contains("Content-Length: \(Self.page.body.count)\r\n") && text.hasSuffix("\r\n\r\n"))
        let notModified = try #require(site.answer(HTTPRequestHead(method: "GET", target: "/watch", versionMajor: 1, versionMinor: 1,
                                                                   headers: [("If-None-Match", Self.page.etag)])))
        #expect(notModified.body == nil && notModified.head.status == .notModified)
        #expect(site.answer(HTTPRequestHead(method: "HEAD", target: "/watch", versionMajor: 1, versionMinor: 1, headers: []))?.body == nil)
    }

    @Test func pagesAnswerWithoutTheirExtensionAndTheRootIsTheIndex() throws {
        #expect(try #require(get("/watch")).body == Self.page.body)
        #expect(try #require(get("/watch?x=1")).body == Self.page.body)
        #expect(try #require(get("/watch.html")).contentType == "text/html; charset=utf-8")
        #expect(try #require(get("/")).body == Self.index.body)
        #expect(get("/index") != nil)
        #expect(get("/map") == nil, "no such page")
        #expect(get("/vigil/client") == nil, "only .html has an alias")
    }

    @Test func nothingOutsideTheTableIsReachable() {
        for target in ["/../watch.html", "/vigil/../watch.html", "/vigil/./client.js", "//watch.html", "/%2e%2e/watch.html",
                       "/vigil%2fclient.js", "/watch.html/", "/watch.html/..", "/WATCH.html", "/watch.html%00", "/watch.html.",
                       "/../../../../etc/passwd", "/etc/passwd", "..", "", "*", "http://x/watch.html", "/watch/", "/vendor/leaflet/../../watch"] {
            #expect(get(target) == nil, "\(target)")
        }
    }

    @Test func directoriesAreNeverListed() {
        for target in ["/vendor", "/vendor/", "/vendor/leaflet", "/vendor/leaflet/", "/vigil/", "/vigil"] {
            #expect(get(target) == nil, "\(target)")
        }
    }

    @Test func aMatchingIfNoneMatchGets304WithTheLengthAndNoBody() throws {
        for value in [Self.page.etag, "W/" + Self.page.etag, "\"other\", " + Self.page.etag, "*"] {
            let r = try #require(get("/watch", headers: [("If-None-Match", value)]))
            #expect(r.status == .notModified, "\(value)")
            #expect(r.body.isEmpty)
            #expect(header(r, "ETag") == Self.page.etag)
            let text = String(decoding: r.serialize(), as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 304 Not Modified\r\n"))
            #expect(text.contains("Content-Length: \(Self.page.body.count)\r\n"))
            #expect(text.hasSuffix("\r\n\r\n"), "no body after the head")
        }
        let changed = try #require(get("/watch", headers: [("If-None-Match", "\"stale\"")]))
        #expect(changed.status == .ok && changed.body == Self.page.body)
    }

    @Test func headHasTheLengthButNoBodyAndOtherMethodsAre405() throws {
        let head = try #require(get("/watch", method: "HEAD"))
        #expect(head.status == .ok && head.body.isEmpty)
        #expect(String(decoding: head.serialize(), as: UTF8.self).contains("Content-Length: \(Self.page.body.count)\r\n"))
        for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
            let r = try #require(get("/watch", method: method))
            #expect(r.status == .methodNotAllowed)
            #expect(header(r, "Allow") == "GET, HEAD")
        }
    }

    @Test func contentTypesComeFromAFixedListOfExtensions() {
        #expect(StaticSite.contentType(forFileName: "a.html") == "text/html; charset=utf-8")
        #expect(StaticSite.contentType(forFileName: "leaflet.CSS") == "text/css; charset=utf-8")
        #expect(StaticSite.contentType(forFileName: "x.min.js") == "text/javascript; charset=utf-8")
        #expect(StaticSite.contentType(forFileName: "marker-icon.png") == "image/png")
        #expect(StaticSite.contentType(forFileName: "site.json") == "application/json")
        for name in ["key.pem", "state.journal", "leaflet.js.gz", "Makefile", "x.", "vigild.yaml", "a.sh"] {
            #expect(StaticSite.contentType(forFileName: name) == nil, "\(name)")
        }
    }

    @Test func theTileServersOriginIsAllowedForImagesAndABadTemplateIsRefused() throws {
        #expect(ServerConfig.tileSource("https://tile.openstreetmap.org/{z}/{x}/{y}.png") == "https://tile.openstreetmap.org")
        #expect(ServerConfig.tileSource("https://{s}.tiles.example.org:8443/osm/{z}/{x}/{y}.png") == "https://*.tiles.example.org:8443")
        #expect(ServerConfig.tileSource("http://127.0.0.1:8000/{z}/{x}/{y}.png") == "http://127.0.0.1:8000")
        for bad in ["ftp://x/{z}/{x}/{y}", "https://x/{z}/{x}.png", "https://x;script-src */{z}/{x}/{y}", "https://x y/{z}/{x}/{y}",
                    "https://x/{z}/{x}/{y}.png'", "https://a.{s}.x/{z}/{x}/{y}", "https:///{z}/{x}/{y}", "https://x", "//x/{z}/{x}/{y}"] {
            #expect(ServerConfig.tileSource(bad) == nil, "\(bad)")
            #expect(throws: ConfigError.self, "\(bad)") { try ConfigLoader.load(yaml: "web:\n  tile_url: '\(bad)'\n") }
        }
        let c = try ConfigLoader.load(yaml: "web:\n  enabled: true\n  root: web\n  leaflet: ''\n  tile_url: ''\n")
        #expect(c.webEnabled && c.webRoot == "web" && c.webLeaflet.isEmpty && c.webTileURL.isEmpty)
        let resolved = c.resolvingWebPaths(relativeTo: "/etc/vigil")
        #expect(resolved.webRoot == "/etc/vigil/web" && resolved.webLeaflet.isEmpty)
    }

    @Test func theLoaderTakesOnlyKnownFilesWithSafeNamesAndAddsSiteJSON() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-site-\(UInt64.random(in: 0...UInt64.max))")
        defer { try? FileManager.default.removeItem(at: root) }
        let leaflet = root.appendingPathComponent("leaflet")
        let pages = root.appendingPathComponent("pages")
        func write(_ path: URL, _ text: String) throws {
            try FileManager.default.createDirectory(at: path.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: path)
        }
        try write(pages.appendingPathComponent("watch.html"), "<!doctype html>")
        try write(pages.appendingPathComponent("css/style.css"), "body{}")
        try write(pages.appendingPathComponent(".env"), "SECRET=1")
        try write(pages.appendingPathComponent(".git/config.js"), "x")
        try write(pages.appendingPathComponent("notes.key"), "x")
        try write(pages.appendingPathComponent("with space.js"), "x")
        try write(leaflet.appendingPathComponent("leaflet.js"), "L = {  };  // the unminified build")
        try write(leaflet.appendingPathComponent("leaflet.js.gz"), "x")
        try write(leaflet.appendingPathComponent("leaflet.min.js"), "L={}")
        try write(leaflet.appendingPathComponent("images/marker-icon.png"), "png")
        var config = ServerConfig()
        config.webRoot = pages.path
        config.webLeaflet = leaflet.path
        config.webTileURL = "https://tile.example.org/{z}/{x}/{y}.png"
        let loaded = try StaticSiteLoader.load(config)
        #expect(loaded.pages == 2 && loaded.leaflet == 3)
        #expect(Set(loaded.site.assets.keys) == ["/watch.html", "/css/style.css", "/vendor/leaflet/leaflet.js", "/vendor/leaflet/leaflet.min.js",
                                                 "/vendor/leaflet/images/marker-icon.png", "/site.json"])
        #expect(loaded.site.assets["/vendor/leaflet/leaflet.js"]?.body == Array("L={}".utf8), "leaflet.min.js when there is one")
        let json = try #require(loaded.site.assets["/site.json"])
        #expect(String(decoding: json.body, as: UTF8.self) == #"{"tile_url":"https://tile.example.org/{z}/{x}/{y}.png","tile_attribution":"© OpenStreetMap contributors","leaflet":true,"map_center":[52.52,13.405],"map_zoom":13}"# + "\n")
        config.webMapLatitude = -33.8688
        config.webMapLongitude = 151.2093
        config.webMapZoom = 9
        let elsewhere = String(decoding: try StaticSiteLoader.load(config).site.assets["/site.json"]!.body, as: UTF8.self)
        #expect(elsewhere.hasSuffix(#","map_center":[-33.8688,151.2093],"map_zoom":9}"# + "\n"))
        #expect(loaded.site.contentSecurityPolicy.contains("img-src 'self' data: https://tile.example.org;"))

        config.webLeaflet = root.appendingPathComponent("absent").path
        let without = try StaticSiteLoader.load(config)
        #expect(without.leaflet == 0)
        #expect(String(decoding: without.site.assets["/site.json"]!.body, as: UTF8.self).contains(#""leaflet":false"#))
        config.webRoot = root.appendingPathComponent("absent").path
        #expect(throws: StaticSiteLoader.Failure.self) { try StaticSiteLoader.load(config) }
    }

    @Test func theRepositorysPagesLoadWithTheTestConfig() throws {
        // Tests run from the package root; config/test.yaml names ../web from its own folder.
        let config = try ConfigLoader.load(yaml: String(contentsOfFile: "config/test.yaml", encoding: .utf8)).resolvingWebPaths(relativeTo: "config")
        #expect(config.webEnabled)
        let loaded = try StaticSiteLoader.load(config)
        for path in ["/watch.html", "/map.html", "/vigil/index.js", "/vigil/client.js"] {
            #expect(loaded.site.assets[path] != nil, "\(path)")
        }
    }
}
