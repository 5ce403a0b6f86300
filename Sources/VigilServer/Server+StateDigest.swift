import VigilCore
import VigilState
import VigilWire

/// The admin listener's `/state/digest` (see `StateDigestCache` and docs/OPERATIONS.md).
extension Server {
    /// `{"digest": hex, "pins": n, "streams": n, "circles": n, "at": unix ms, "cluster_sequence": n
    /// or null, "age_ms": ms, "compute_ms": ms}`; 404 without a `/v1` application (no state to digest).
    func stateDigestResponse(_ head: HTTPRequestHead) -> HTTPResponse {
        guard let v1 else {
            return HTTPResponse(status: .notFound, body: Array("no /v1 application: no state\n".utf8), contentType: "text/plain; charset=utf-8")
        }
        let nowNs = StateDigestCache.monotonicNanoseconds()
        let entry = stateDigests.entry(nowNs: nowNs, wallMs: V1Application.wallClockMs()) { now in
            StateDigest.of(map: v1.hub, panic: v1.panic, checkin: v1.checkin,
                           rules: StateDigest.Rules(now: now, panic: v1.panic.settings, checkin: v1.checkin.settings))
        }
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.field("digest", entry.digest.hex)
        w.field("pins", Int64(entry.digest.pins))
        w.field("streams", Int64(entry.digest.streams))
        w.field("circles", Int64(entry.digest.circles))
        w.field("at", entry.at)
        w.key("cluster_sequence")
        if let sequence = entry.replicatedSequence { w.int(Int64(bitPattern: sequence)) } else { w.null() }
        w.field("age_ms", (nowNs - entry.computedNs) / 1_000_000)
        w.field("compute_ms", Double(entry.costNs / 1_000) / 1_000)
        w.endObject()
        let body = w.bytes + [10]
        return HTTPResponse(status: .ok, body: head.method == "HEAD" ? [] : body, contentType: "application/json", contentLength: body.count)
    }
}
