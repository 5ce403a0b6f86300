extension GeohashCell {
    /// The eight compass steps to an adjacent cell of the same precision.
    public enum Direction: CaseIterable, Sendable {
        case n, ne, e, se, s, sw, w, nw

        /// +1 is one row north (towards lat 90).
        var rowStep: Int {
            switch self {
            case .n, .ne, .nw: return 1
            case .s, .se, .sw: return -1
            case .e, .w: return 0
            }
        }

        /// +1 is one column east (towards lon 180, then wrapping to -180).
        var columnStep: Int {
            switch self {
            case .e, .ne, .se: return 1
            case .w, .nw, .sw: return -1
            case .n, .s: return 0
            }
        }
    }
}
