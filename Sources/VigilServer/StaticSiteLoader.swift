import Foundation
import VigilCore
import VigilPush

/// Reads the web pages' files into a `StaticSite` at start-up (never while serving): the pages'
/// folder (`web.root`) at `/`, Leaflet's folder (`web.leaflet`, Debian's libjs-leaflet) at
/// `/vendor/leaflet/`, and `/site.json`, what the pages need to know (tile server, attribution,
/// where the map opens).
///
/// Only regular files with a known extension and a name of URL-safe characters are taken (dot
/// files never), within caps on count, size and depth, so a wrong `web.root` (such as `/`) fails
/// start-up with a reason instead of reading a disk into memory. Symbolic links are followed: the
/// folders are the operator's (the repository's `web/vigil` links to the JavaScript client), and
/// what they hold is decided here, once, not by a request.
public enum StaticSiteLoader {
    public static let maxFiles = 512
    public static let maxFileBytes = 8 * 1024 * 1024
    public static let maxTotalBytes = 32 * 1024 * 1024
    public static let maxDepth = 6

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public struct Loaded {
        public var site: StaticSite
        /// Files read from `web.root` and from Leaflet's folder (0 when it is absent).
        public var pages: Int
        public var leaflet: Int
    }

    public static func load(_ config: ServerConfig) throws -> Loaded {
        var assets: [StaticAsset] = []
        var total = 0
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: config.webRoot, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw Failure(description: "web.root \(config.webRoot) is not a directory")
        }
        try collect(directory: config.webRoot, urlPrefix: "", depth: 0, into: &assets, total: &total)
        let pages = assets.count
        guard pages > 0 else { throw Failure(description: "web.root \(config.webRoot) holds no page files") }
        var leaflet = 0
        if !config.webLeaflet.isEmpty, FileManager.default.fileExists(atPath: config.webLeaflet, isDirectory: &isDirectory), isDirectory.boolValue {
            try collect(directory: config.webLeaflet, urlPrefix: "/vendor/leaflet", depth: 0, into: &assets, total: &total)
            leaflet = assets.count - pages
            // Debian's leaflet.js is the unminified build (430 KB); its leaflet.min.js (140 KB) is what
            // the pages get as leaflet.js when present (npm's dist/leaflet.js is minified already).
            if let min = assets.firstIndex(where: { $0.path == "/vendor/leaflet/leaflet.min.js" }),
               let full = assets.firstIndex(where: { $0.path == "/vendor/leaflet/leaflet.js" }) {
                assets[full] = StaticAsset(path: assets[full].path, body: assets[min].body, contentType: assets[full].contentType)
            }
        }
        assets.append(StaticAsset(path: "/site.json", body: siteJSON(config, leaflet: leaflet > 0), contentType: "application/json"))
        let images = config.webTileURL.isEmpty ? [] : [ServerConfig.tileSource(config.webTileURL) ?? ""].filter { !$0.isEmpty }
        return Loaded(site: StaticSite(assets: assets, imageSources: images), pages: pages, leaflet: leaflet)
    }

    /// `{"tile_url":..,"tile_attribution":..,"leaflet":true,"map_center":[lat,lon],"map_zoom":z}`,
    /// and `"push_public_key"` (the VAPID `applicationServerKey`, unpadded base64url) when Web Push
    /// is configured: read by the pages at start (a page subscribes with that key).
    static func siteJSON(_ config: ServerConfig, leaflet: Bool) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.field("tile_url", config.webTileURL)
        w.field("tile_attribution", config.webTileAttribution)
        w.field("leaflet", leaflet)
        w.key("map_center")
        w.beginArray()
        w.double(config.webMapLatitude)
        w.double(config.webMapLongitude)
        w.endArray()
        w.field("map_zoom", Int64(config.webMapZoom))
        if let vapid = config.push.vapid { w.field("push_public_key", vapid.applicationServerKey) }
        w.endObject()
        return w.bytes + [10]
    }

    static func isURLSafe(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && name.utf8.allSatisfy {
            ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 95 || $0 == 46
        }
    }

    private static func collect(directory: String, urlPrefix: String, depth: Int, into assets: inout [StaticAsset], total: inout Int) throws {
        guard depth <= maxDepth else { throw Failure(description: "\(directory): deeper than \(maxDepth) folders") }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        } catch {
            throw Failure(description: "cannot list \(directory): \(error.localizedDescription)")
        }
        for name in names where isURLSafe(name) {
            let path = directory + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }  // a dangling link
            if isDirectory.boolValue {
                try collect(directory: path, urlPrefix: urlPrefix + "/" + name, depth: depth + 1, into: &assets, total: &total)
                continue
            }
            guard let type = StaticSite.contentType(forFileName: name) else { continue }
            let attributes = try? FileManager.default.attributesOfItem(atPath: path)
            let size = (attributes?[.size] as? NSNumber)?.intValue ?? 0
            guard size <= maxFileBytes else { throw Failure(description: "\(path): over \(maxFileBytes) bytes") }
            guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "cannot read \(path)") }
            guard data.count <= maxFileBytes else { throw Failure(description: "\(path): over \(maxFileBytes) bytes") }
            total += data.count
            guard assets.count < maxFiles, total <= maxTotalBytes else {
                throw Failure(description: "\(directory): more than \(maxFiles) files or \(maxTotalBytes) bytes to serve")
            }
            assets.append(StaticAsset(path: urlPrefix + "/" + name, body: [UInt8](data), contentType: type))
        }
    }
}
