import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Cluster counts are not persisted: a restored hub counts its pins once. They must equal the
/// live hub's counts (kept change by change) and a recount, after a snapshot + journal restore.
@Suite struct ReplicationRestoreTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func restoredCountsEqualTheLiveOnesAndARecount(seed: UInt64) throws {
        var run = StateReplayTests.drive(seed: seed, operations: 500, snapshotAt: 150 + Int(seed) * 20)
        let restored = try StateReplayTests.restore(snapshot: run.snapshot, journal: run.after, now: run.now)
        var nobody: [PinDelivery] = []
        run.map.expire(now: run.now, out: &nobody)      // as the restore did
        let live = run.map.store.clusterCountsByName()
        #expect(!live.isEmpty && restored.map.store.count > 0)
        #expect(live == run.map.store.clusterCountsByName(recount: true))
        #expect(restored.map.store.clusterCountsByName() == live)
        #expect(restored.map.store.clusters.precisions == StateReplayTests.pinSettings.clusterPrecisionMin...StateReplayTests.pinSettings.clusterPrecisionMax)
    }
}
