import VigilCore

/// One cell of a cluster subscription as the client last heard it.
public struct ClusterCell: Equatable, Sendable {
    public var count: Int
    public var byCategory: [String: Int]
    public var lat: Double?
    public var lon: Double?

    public init(count: Int, byCategory: [String: Int] = [:], lat: Double? = nil, lon: Double? = nil) {
        self.count = count
        self.byCategory = byCategory
        self.lat = lat
        self.lon = lon
    }
}

/// What a cluster subscriber shows: its reply's cells with every `clusters.changed` applied
/// (a cell with count 0 is removed). `docs/PROTOCOL.md`, "Cluster subscriptions".
public struct ClusterView: Equatable, Sendable {
    public var precision: Int
    public var cells: [String: ClusterCell]

    public init(precision: Int = 0, cells: [String: ClusterCell] = [:]) {
        self.precision = precision
        self.cells = cells
    }

    /// Parses one cell object; nil when it is malformed.
    static func cell(_ value: JSONValue) -> (String, ClusterCell)? {
        guard let o = value.object, let id = o["cell"]?.string, let count = o["count"]?.int64, count >= 0 else { return nil }
        var by: [String: Int] = [:]
        for (k, v) in o["by_category"]?.object?.members ?? [] {
            guard let n = v.int64 else { return nil }
            by[k] = Int(n)
        }
        return (id, ClusterCell(count: Int(count), byCategory: by, lat: o["lat"]?.double, lon: o["lon"]?.double))
    }

    /// The view a subscribe reply (`{"type":"ok","precision":P,"clusters":[...]}`) gives; nil
    /// when the reply is not a cluster reply.
    public static func reply(_ m: JSONObject) -> ClusterView? {
        guard let p = m["precision"]?.int64, let list = m["clusters"]?.array else { return nil }
        var view = ClusterView(precision: Int(p))
        for v in list {
            guard let (id, c) = cell(v) else { return nil }
            view.cells[id] = c
        }
        return view
    }

    /// Applies a `clusters.changed`; returns the number of cells it carried, or nil when the
    /// message is malformed or of another precision than the view's.
    public mutating func apply(changed m: JSONObject) -> Int? {
        guard let p = m["precision"]?.int64, Int(p) == precision, let list = m["cells"]?.array else { return nil }
        for v in list {
            guard let (id, c) = Self.cell(v) else { return nil }
            cells[id] = c.count == 0 ? nil : c
        }
        return list.count
    }

    /// How this view differs from `fresh` (what a new subscribe to the same area returns): the
    /// first few differences as text, empty when they agree.
    public func differences(from fresh: ClusterView, limit: Int = 3) -> [String] {
        var out: [String] = []
        if precision != fresh.precision { out.append("precision \(precision), fresh \(fresh.precision)") }
        for id in Set(cells.keys).union(fresh.cells.keys).sorted() where out.count < limit {
            let mine = cells[id], theirs = fresh.cells[id]
            if mine != theirs {
                out.append("cell \(id): view \(Self.describe(mine)), fresh \(Self.describe(theirs))")
            }
        }
        return out
    }

    private static func describe(_ c: ClusterCell?) -> String {
        guard let c else { return "absent" }
        return "count \(c.count) \(c.byCategory.sorted { $0.key < $1.key }) at \(c.lat ?? .nan),\(c.lon ?? .nan)"
    }
}

/// The two checks of `vigil-load clusters` on one subscriber: its view converges on a fresh
/// subscribe's, and its `clusters.changed` come at most once per interval.
public struct ClusterChecker: Sendable {
    public let intervalNs: UInt64
    public let slackNs: UInt64
    public private(set) var convergence = CheckErrors(limit: 20)
    public private(set) var pacing = CheckErrors(limit: 20)
    public private(set) var viewsChecked = 0
    public private(set) var gapsChecked: UInt64 = 0
    /// The shortest gap seen between two `clusters.changed` of one subscriber.
    public private(set) var shortestGapNs: UInt64 = .max

    public init(intervalNs: UInt64, slackNs: UInt64) {
        self.intervalNs = intervalNs
        self.slackNs = slackNs
    }

    /// A subscriber's view at the end against a fresh subscribe's reply.
    public mutating func converged(subscriber: Int, view: ClusterView, fresh: ClusterView) {
        viewsChecked += 1
        for d in view.differences(from: fresh) { convergence.record("subscriber \(subscriber): \(d)") }
    }

    /// A checked subscriber that never got the answer to its final subscribe (closed, refused).
    public mutating func noteUnchecked(subscriber: Int) {
        convergence.record("subscriber \(subscriber): no fresh reply to compare its view with")
    }

    /// The gap between a subscriber's two consecutive `clusters.changed` (receive times).
    public mutating func gap(subscriber: Int, ns: UInt64) {
        gapsChecked += 1
        shortestGapNs = min(shortestGapNs, ns)
        if ns + slackNs < intervalNs {
            pacing.record("subscriber \(subscriber): two clusters.changed \(ns / 1_000_000) ms apart (interval \(intervalNs / 1_000_000) ms, slack \(slackNs / 1_000_000) ms)")
        }
    }
}
