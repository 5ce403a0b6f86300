import VigilLoad

/// The seeded generator of every property test: VigilLoad's `SplitMix64`, so tests, the load
/// client and vigil-bench share one implementation and a seed means one sequence everywhere.
/// A test target imports VigilTestSupport and writes `SplitMix64(state: seed)`.
public typealias SplitMix64 = VigilLoad.SplitMix64
