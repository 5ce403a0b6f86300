import Foundation
import Testing
@testable import VigilClient

// The README's example (and the DocC catalog's "Getting started"), compiled and run against a
// real vigild: a map and a contact watching a stream until it ends.

@Suite(.serialized, .timeLimit(.minutes(1)))
struct ExampleTests {
    @Test func theReadmeExampleRuns() async throws {
        let d = try Daemon(.client())
        try await d.start()
        // A phone in danger, for the example's contact to watch.
        let phone = try await liveClient(d)
        let owner = try await phone.startPanic(status: .red, position: Position(lat: 52.5, lon: 13.4))
        let streamID = owner.stream
        let watchToken = try #require(await owner.snapshot()?.watchTokens.first)
        let drawn = Drawn()
        func draw(_ change: MapEvent) { drawn.add("\(change)") }
        func show(_ event: WatchEvent) { drawn.add("\(event)") }
        let options = VigilClientOptions()
        // The phone moves and ends once the example's contact watches (the owner hears the count).
        Task {
            for await case .watchers(let n) in owner.events where n >= 1 { break }
            try await owner.update(Position(lat: 52.51, lon: 13.4))
            try await owner.end("safe")
        }

        // --- the README's example, as it is there but for the URL and the options ---
        let client = VigilClient(url: d.url(), options: options)
        try await client.connect()
        let map = try await client.subscribe(area: .bbox(south: 52.3, west: 13.0, north: 52.7, east: 13.8))
        Task { for await change in map.events { draw(change) } }      // reconciled across reconnects
        let watch = try await client.watch(stream: streamID, watchToken: watchToken) // from an SOS link
        for await event in watch.events { show(event) }               // each seq once, in order, or a gap
        // ---

        #expect(drawn.lines.contains { $0.hasPrefix("synced(count: 0") })
        #expect(drawn.lines.contains { $0.hasPrefix("ended(") })
        await client.close()
        await phone.close()
        _ = await d.stop()
    }
}

final class Drawn: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [String] = []
    func add(_ s: String) { lock.withLock { all.append(s) } }
    var lines: [String] { lock.withLock { all } }
}
