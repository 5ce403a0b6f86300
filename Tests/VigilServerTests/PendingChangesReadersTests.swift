import Testing
import VigilCore
import VigilTestSupport
@testable import VigilServer

/// The readers rule of `PendingChanges.note` (issue 27 §3: an exhaustive switch), for every
/// operation: a read whose reply may show a change of the same turn is withdrawn with it.
@Suite struct PendingChangesReadersTests {
    /// The operations whose reply shows state; every other one does not.
    static let readers: Set<String> = [
        "subscribe", "subscribeClusters", "panicWatch", "panicWatchAsMember", "panicResume", "checkin.open", "checkin.join",
    ]

    @Test func readsStateOfEveryOperation() {
        let names = OperationSamples.client.map(OperationSamples.caseName)
        #expect(Set(names).count == names.count && Self.readers.isSubset(of: names))
        #expect(Set(OperationSamples.client.map(\.metricIndex)) == Set(ClientOperation.names.indices))
        for operation in OperationSamples.client {
            let name = OperationSamples.caseName(operation)
            #expect(PendingChanges.readsState(operation) == Self.readers.contains(name), "\(name)")
        }
    }
}
