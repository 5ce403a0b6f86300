import Testing
import VigilTestSupport
@testable import VigilCore

/// Issue 27 §3: every classification of operations is an exhaustive switch, and this table says
/// what each one answers for every operation (`OperationSamples`: one value of each case), so a
/// change of classification fails here, and a new operation fails until it is put in the table.
@Suite struct OperationClassificationTests {
    struct Row {
        var subscribe = false
        var write = false
        var changesState = false
        var readsState = false
        var membership = false
    }

    /// `isSubscribe`, `isWrite`, `changesState` of `ClientOperation`; `readsState` of the
    /// check-in operations (nil for the others, which have no such property).
    static let table: [String: Row] = [
        "subscribe": Row(subscribe: true, membership: true),
        "subscribeClusters": Row(subscribe: true, membership: true),
        "unsubscribe": Row(membership: true),
        "pinCreate": Row(write: true, changesState: true),
        "pinUpdate": Row(write: true, changesState: true),
        "pinDelete": Row(write: true, changesState: true),
        "pinVote": Row(write: true, changesState: true),
        "panicStart": Row(write: true, changesState: true),
        "panicStartE2E": Row(write: true, changesState: true),
        // A person in danger is never held to the write limit: a stream's own updates are not writes.
        "panicUpdate": Row(changesState: true),
        "panicUpdateSealed": Row(changesState: true),
        "panicRekey": Row(write: true, changesState: true),
        "panicStatus": Row(changesState: true),
        "panicEnd": Row(changesState: true),
        "panicResume": Row(membership: true),
        "panicWatch": Row(membership: true),
        "panicWatchAsMember": Row(membership: true),
        "panicUnwatch": Row(membership: true),
        "panicInvite": Row(write: true, changesState: true),
        "panicRevoke": Row(changesState: true),
        "panicTimer": Row(changesState: true),
        "checkin.create": Row(write: true, changesState: true),
        "checkin.open": Row(readsState: true, membership: true),
        "checkin.invite": Row(write: true, changesState: true),
        "checkin.revoke": Row(changesState: true),
        "checkin.answer": Row(changesState: true),
        "checkin.home": Row(changesState: true),
        "checkin.close": Row(changesState: true),
        "checkin.join": Row(readsState: true, membership: true),
        "checkin.request": Row(write: true, changesState: true),
        "checkin.leave": Row(membership: true),
        "checkin.register": Row(write: true, changesState: true),
        "checkin.unregister": Row(changesState: true),
        "checkin.ack": Row(changesState: true),
    ]

    static func row(_ operation: ClientOperation) -> Row {
        let name = OperationSamples.caseName(operation)
        guard let row = table[name] else {
            Issue.record("\(name) is not in the classification table")
            return Row()
        }
        return row
    }

    @Test func theSamplesHoldEveryOperationOnceAndTheTableNamesThemAll() {
        let names = OperationSamples.client.map(OperationSamples.caseName)
        #expect(Set(names).count == names.count)
        #expect(Set(names) == Set(Self.table.keys))
        #expect(Set(OperationSamples.client.map(\.metricIndex)) == Set(ClientOperation.names.indices))
        #expect(OperationSamples.checkin.map(\.index) == Array(CheckinOperation.names.indices))
    }

    @Test func isSubscribeOfEveryOperation() {
        for operation in OperationSamples.client {
            #expect(operation.isSubscribe == Self.row(operation).subscribe, "\(OperationSamples.caseName(operation))")
        }
    }

    @Test func isWriteOfEveryOperation() {
        for operation in OperationSamples.client {
            #expect(operation.isWrite == Self.row(operation).write, "\(OperationSamples.caseName(operation))")
        }
    }

    @Test func changesStateOfEveryOperation() {
        for operation in OperationSamples.client {
            #expect(operation.changesState == Self.row(operation).changesState, "\(OperationSamples.caseName(operation))")
        }
    }

    @Test func readsStateOfEveryCheckinOperation() {
        for operation in OperationSamples.checkin {
            #expect(operation.readsState == Self.row(.checkin(operation)).readsState, "\(CheckinOperation.names[operation.index])")
        }
    }

    @Test func changesMembershipOfEveryOperation() {
        for operation in OperationSamples.client {
            #expect(operation.changesMembership == Self.row(operation).membership, "\(OperationSamples.caseName(operation))")
        }
    }

    /// A write is always a change of state (`changesState` is a superset of `isWrite`).
    @Test func everyWriteChangesState() {
        for operation in OperationSamples.client where operation.isWrite {
            #expect(operation.changesState, "\(OperationSamples.caseName(operation))")
        }
    }
}
