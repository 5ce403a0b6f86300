/// `subscribe`'s `view` (docs/PROTOCOL.md, "Cluster subscriptions").
extension RequestDecoder {
    /// True for `"view":"clusters"`; false for `"pins"` or no `view` (today's subscription).
    func clustersView(_ v: JSONValue?) throws -> Bool {
        guard let v else { return false }
        switch v.string {
        case "pins": return false
        case "clusters": return true
        default: throw RequestError("invalid_view", field: "view", "view must be \"pins\" or \"clusters\"")
        }
    }
}
