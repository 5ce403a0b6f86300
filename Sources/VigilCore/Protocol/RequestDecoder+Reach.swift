import VigilGeo

/// The fields of pins with a reach (Radar): a pin's `range_m` and a subscription's `viewer`.
extension RequestDecoder {
    /// `range_m`: whole metres from 1 to `pins.max_range_m`.
    func range(_ v: JSONValue, field: String) throws -> Int {
        guard let n = v.int64, n >= 1, n <= settings.maxRangeMeters else {
            throw RequestError("invalid_range", field: field, "\(field) must be an integer number of metres from 1 to \(settings.maxRangeMeters)")
        }
        return Int(n)
    }

    /// `viewer`: `{"lat": .., "lon": ..}`, the subscriber's own position. Errors never echo the
    /// values (a position is personal; error replies go only to the sender, but say no more than needed).
    func decodeViewer(_ v: JSONValue) throws -> GeoPoint {
        guard let o = v.object else {
            throw RequestError("invalid_viewer", field: "viewer", "viewer must be an object {\"lat\": .., \"lon\": ..}")
        }
        for key in o.keys where key != "lat" && key != "lon" {
            throw RequestError.unknownField("viewer.\(key.prefix(64))")
        }
        guard let lat = o["lat"] else { throw RequestError.missing("viewer.lat") }
        guard let lon = o["lon"] else { throw RequestError.missing("viewer.lon") }
        guard let la = lat.double, la.isFinite, la >= -90, la <= 90 else {
            throw RequestError("invalid_viewer", field: "viewer.lat", "viewer.lat must be a finite number between -90 and 90")
        }
        guard let lo = lon.double, lo.isFinite, lo >= -180, lo <= 180 else {
            throw RequestError("invalid_viewer", field: "viewer.lon", "viewer.lon must be a finite number between -180 and 180")
        }
        return GeoPoint(lat: la, lon: lo)
    }
}
