/// Cluster views (docs/PROTOCOL.md, "Cluster subscriptions"): a subscribe's cells, and
/// `clusters.changed`.
extension ServerMessages {
    /// `{"cell":"u33d","count":3,"by_category":{"general":2,"hazard":1},"lat":..,"lon":..}`; a cell
    /// now empty is `{"cell":"u33d","count":0}`.
    public static func clusterCell(_ c: ClusterCell, into w: inout JSONWriter) {
        w.beginObject()
        w.key("cell"); w.string(c.cell.string)
        w.key("count"); w.int(Int64(c.count))
        if c.count > 0 {
            w.key("by_category")
            w.beginObject()
            for entry in c.byCategory { w.key(entry.category); w.int(Int64(entry.count)) }
            w.endObject()
            w.key("lat"); w.double(c.lat)
            w.key("lon"); w.double(c.lon)
        }
        w.endObject()
    }

    /// `clusterCell` as bytes, to be spliced into many messages.
    public static func clusterCellJSON(_ c: ClusterCell) -> [UInt8] {
        var w = JSONWriter(capacity: 160)
        clusterCell(c, into: &w)
        return w.bytes
    }

    /// `"precision":P,"clusters":[...]` (members of the subscribe's `ok`). Cells are cut where the
    /// reply would pass `maxBytes`, and `"truncated":true` says so.
    public static func clusterList(precision: Int, _ cells: [ClusterCell], maxBytes: Int, into w: inout JSONWriter) {
        w.key("precision"); w.int(Int64(precision))
        w.key("clusters")
        // Room for the closing `],"truncated":true}` after the last cell that fits.
        let written = cellArray(cells.count, limit: maxBytes == .max ? .max : maxBytes - 24, atLeastOne: false, into: &w) { i, w in
            clusterCell(cells[i], into: &w)
        }
        if written < cells.count { w.key("truncated"); w.bool(true) }
    }

    /// `{"type":"clusters.changed","precision":P,"cells":[...]}`: the cells that changed since the
    /// subscriber was last told. Returns how many of `cells` fit in `maxBytes` (at least one);
    /// the rest wait for the subscriber's next message.
    public static func clustersChanged(precision: Int, _ cells: [[UInt8]], maxBytes: Int, into w: inout JSONWriter) -> Int {
        w.beginObject()
        w.key("type"); w.string("clusters.changed")
        w.key("precision"); w.int(Int64(precision))
        w.key("cells")
        let written = cellArray(cells.count, limit: maxBytes == .max ? .max : maxBytes - 4, atLeastOne: true, into: &w) { i, w in
            w.raw(cells[i])
        }
        w.endObject()
        return written
    }

    /// A JSON array of as many of `count` cells (`cell(i, &w)` writes the i-th) as keep the output
    /// within `limit` bytes; returns how many.
    private static func cellArray(_ count: Int, limit: Int, atLeastOne: Bool, into w: inout JSONWriter,
                                  _ cell: (Int, inout JSONWriter) -> Void) -> Int {
        w.beginArray()
        var written = 0
        for i in 0..<count {
            let mark = w.mark()
            cell(i, &w)
            if w.count > limit && !(atLeastOne && written == 0) {
                w.rollBack(to: mark)
                break
            }
            written += 1
        }
        w.endArray()
        return written
    }
}
