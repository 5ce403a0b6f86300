import Testing
import VigilCore
@testable import VigilServer

/// Cluster subscriptions through the server's turn: `clusters.changed` goes out after the journal
/// step, so a change the journal could not record is never counted for anyone.
@Suite struct ReplicationGlueTests {
    typealias U = UnrecordedChangesTests

    @Test func aChangeTheJournalCouldNotRecordIsNeverCounted() throws {
        let s = try U.Setup { $0.pins.clusterIntervalMs = 100 }
        let subscriber = try s.h.open()
        let writer = try s.h.open()
        let reply = try U.ask(s.h, subscriber, #"{"op":"subscribe","ref":1,"area":\#(U.area),"view":"clusters"}"#)
        #expect(reply.type == "ok" && reply["clusters"]?.array?.isEmpty == true)
        s.log.failNextCommit = true
        U.expectUnavailable(try U.ask(s.h, writer, #"{"op":"pin.create","ref":2,"pin":\#(U.pin)}"#))
        #expect(try U.ask(s.h, writer, #"{"op":"pin.create","ref":3,"pin":\#(U.pin)}"#).type == "ok")
        try s.h.run(maxTurns: 5_000, until: { subscriber.poll(); return !subscriber.all("clusters.changed").isEmpty })
        let changed = try #require(subscriber.all("clusters.changed").first)
        let cells = try #require(changed["cells"]?.array)
        #expect(cells.count == 1 && cells.first?.object?["count"]?.int == 1, "the refused pin is not counted: \(changed.text)")
        #expect(s.h.v1.hub.store.count == 1)
    }
}
