/// Whether an area holds a whole geohash cell, decided once when a subscription is registered so
/// that the fan-out can skip the per-pin area test for the cells deep inside a map's view
/// (`SubscriptionIndex.Member.whole`).
///
/// The answer must be exact where it says yes: `true` promises that `contains(p)`, as computed,
/// is true for every point `p` of the cell's box (edges included). When that cannot be shown
/// cheaply the answer is `false`, and the caller tests each pin as before: conservative, never
/// generous.
extension GeoArea {
    /// Slack between a circle's radius and the largest distance from its centre to a cell's
    /// corner, covering the rounding of two haversine evaluations (the corner's, when the flag is
    /// set, and a pin's, at delivery). Away from the antipode the haversine is good to nanometres;
    /// near it `asin(sqrt(h))` amplifies an error of a few ulps in `h` (~1e-15) to at most
    /// `2 * sqrt(1e-15)` rad, about 0.4 m. Ten metres is far above both together and costs
    /// nothing that matters: a cell within 10 m of the rim is simply tested per pin.
    static let wholeCellSlackMeters = 10.0

    /// True only when every point of `cell` (a box that does not cross the antimeridian, like
    /// every geohash cell's) is certainly inside this area as `contains` computes it.
    public func surelyContains(_ cell: GeoBox) -> Bool {
        guard cell.isValid, !cell.crossesAntimeridian else { return false }
        switch self {
        case .box(let box):
            return box.containsWhole(cell)
        case .circle(let center, let radius):
            return Self.capSurelyContains(center: center, radiusMeters: radius, cell)
        }
    }

    /// The largest great-circle distance from `center` to a point of `cell` is reached at one of
    /// its corners when each of the cell's longitudes is within 90° of the centre's, or when the
    /// centre is a pole. Proof sketch: the distance from `center` has no local maximum except at
    /// the antipode, which the longitude condition keeps out of the cell (it is 180° away; a pole
    /// centre's antipode is the other pole, where the corner argument below still holds), so the
    /// maximum lies on the cell's edges. Along a parallel the distance grows with the longitude
    /// difference in 0...180°, so it peaks at an end. Along a meridian at longitude difference Δ,
    /// cos(distance) = A sin φ + B cos φ = R cos(φ − φ*) with B = cos(lat_c) cos Δ ≥ 0 for |Δ| ≤ 90°,
    /// so φ* is in −90…90° and every φ of the segment is within 180° of it: the cosine falls
    /// monotonically with |φ − φ*| and the distance peaks at an end again. At a pole centre the
    /// distance depends on latitude alone, so a corner (on the far parallel) attains it.
    /// Anything else (a cell more than 90° of longitude away, which only continent-sized circles
    /// meet) answers false.
    private static func capSurelyContains(center: GeoPoint, radiusMeters: Double, _ cell: GeoBox) -> Bool {
        guard center.isValid, radiusMeters.isFinite else { return false }
        if abs(center.lat) != 90 {
            // The cell's longitudes relative to the centre's, as one interval starting in
            // [-180, 180): a cell never crosses the antimeridian, so it is [offset, offset + width].
            var offset = cell.west - center.lon
            if offset < -180 { offset += 360 } else if offset >= 180 { offset -= 360 }
            // 89.999°, not 90°: rounding in the offset must not decide the case.
            guard offset >= -89.999 && offset + (cell.east - cell.west) <= 89.999 else { return false }
        }
        let limit = radiusMeters - wholeCellSlackMeters
        return GeoDistance.meters(center, GeoPoint(lat: cell.south, lon: cell.west)) <= limit
            && GeoDistance.meters(center, GeoPoint(lat: cell.south, lon: cell.east)) <= limit
            && GeoDistance.meters(center, GeoPoint(lat: cell.north, lon: cell.west)) <= limit
            && GeoDistance.meters(center, GeoPoint(lat: cell.north, lon: cell.east)) <= limit
    }
}

extension GeoBox {
    /// Whether every point of `inner` (not crossing the antimeridian) is inside this box: plain
    /// comparisons, so exact. A crossing box holds `inner` when `inner` lies in its part from
    /// `west` to 180 or in its part from -180 to `east`; the second spelling of lon ±180 only
    /// adds points `contains` accepts, so ignoring it is conservative.
    func containsWhole(_ inner: GeoBox) -> Bool {
        guard south <= inner.south && inner.north <= north else { return false }
        if crossesAntimeridian {
            return west <= inner.west || inner.east <= east
        }
        return west <= inner.west && inner.east <= east
    }
}
