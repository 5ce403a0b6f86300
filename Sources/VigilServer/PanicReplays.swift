import OrderedCollections
import VigilCore

/// The `since` replays in progress: for each connection that asked a stream for the events it
/// missed, the next seq it is owed and the last one.
///
/// A replay is paced by the watcher's reading, never conflated: the server sends its events from
/// the stream's history a window at a time (`step` says `.send` while the connection holds less
/// than the window), waits for the connection's queue to drain (`drained`), and goes on. So a
/// replay of any length the history allows costs the server at most one window of queued bytes
/// per watcher, and a watcher that reads promptly gets every event, whatever the conflation
/// threshold (docs/PROTOCOL.md, "Watching"). Live events of the stream for a connection with a
/// replay in progress are not sent live: they are in the history too, so the replay takes them
/// in order (`deferLive` moves its end), and the watcher sees one sequence with no duplicate and
/// no reordering. When the replay reaches the end it owes, it is over and live events flow again.
///
/// A value, like the hubs: it knows seqs and connection numbers, not sockets or queues; the
/// application carries out its steps (`V1Application+Replay`). Each connection has at most a few
/// streams in replay, so a connection's replays are a small array.
struct PanicReplays {
    /// One stream's replay to one connection: `next` is the seq to send next, `through` the last
    /// seq owed (the stream's seq when the watch was answered, or a later live event's).
    struct Cursor: Equatable {
        let stream: StreamID
        var next: UInt64
        var through: UInt64
    }

    /// What to do next for one replay.
    enum Step: Equatable {
        /// Send the event with this seq, then report it with `sent`.
        case send(UInt64)
        /// The connection holds a window already: wait for its queue to drain.
        case wait
        /// Everything owed was sent (or there is no replay): it is over.
        case done
    }

    private var byConnection: [Int32: [Cursor]] = [:]
    /// Connections whose queue drained while a replay of theirs waited, to step at the end of the
    /// next turn (in the order they drained; a connection at most once).
    private var ready = OrderedSet<Int32>()
    /// Replays in progress, all connections together.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The replay of `stream` to `fd`, if one is in progress.
    func cursor(_ fd: Int32, _ stream: StreamID) -> Cursor? {
        byConnection[fd]?.first { $0.stream == stream }
    }

    /// The streams with a replay in progress to `fd`, in the order they started.
    func streams(of fd: Int32) -> [StreamID] {
        byConnection[fd]?.map(\.stream) ?? []
    }

    /// A watch of `stream` by `fd` was answered: its replay is `seqs` (nil: none). Any replay of
    /// that stream still in progress to that connection ends here: the new reply's `state` and
    /// replay supersede it.
    mutating func start(_ fd: Int32, _ stream: StreamID, seqs: ClosedRange<UInt64>?) {
        remove(fd, stream)
        guard let seqs else { return }
        byConnection[fd, default: []].append(Cursor(stream: stream, next: seqs.lowerBound, through: seqs.upperBound))
        count += 1
    }

    /// A live event `seq` of `stream` for `fd`. True when a replay of that stream to `fd` is in
    /// progress: the event is not to be sent live, the replay will send it in its place.
    mutating func deferLive(_ fd: Int32, _ stream: StreamID, seq: UInt64) -> Bool {
        guard var cursors = byConnection[fd], let i = cursors.firstIndex(where: { $0.stream == stream }) else { return false }
        cursors[i].through = max(cursors[i].through, seq)
        byConnection[fd] = cursors
        return true
    }

    /// The next step of the replay of `stream` to `fd`, whose connection holds `queuedBytes`
    /// unsent, sending while it holds less than `window`.
    func step(_ fd: Int32, _ stream: StreamID, queuedBytes: Int, window: Int) -> Step {
        guard let c = cursor(fd, stream), c.next <= c.through else { return .done }
        return queuedBytes < window ? .send(c.next) : .wait
    }

    /// The event `seq` (the one `step` named) is queued on the connection.
    mutating func sent(_ fd: Int32, _ stream: StreamID, seq: UInt64) {
        guard var cursors = byConnection[fd], let i = cursors.firstIndex(where: { $0.stream == stream }) else { return }
        precondition(cursors[i].next == seq, "a replay sends its seqs in order")
        cursors[i].next = seq + 1
        byConnection[fd] = cursors
    }

    /// Ends the replay of `stream` to `fd` (done, or abandoned: the watcher stopped watching,
    /// the connection is closing, or the history moved past it).
    mutating func remove(_ fd: Int32, _ stream: StreamID) {
        guard var cursors = byConnection[fd], let i = cursors.firstIndex(where: { $0.stream == stream }) else { return }
        cursors.remove(at: i)
        count -= 1
        byConnection[fd] = cursors.isEmpty ? nil : cursors
    }

    /// The connection is gone: all its replays end.
    mutating func closed(_ fd: Int32) {
        guard let cursors = byConnection.removeValue(forKey: fd) else { return }
        count -= cursors.count
    }

    /// `fd`'s queue drained: its replays go on at the end of the next turn (`takeReady`).
    mutating func drained(_ fd: Int32) {
        guard byConnection[fd] != nil else { return }
        ready.append(fd)
    }

    /// The connections to step now, each once; the list starts empty again.
    mutating func takeReady() -> [Int32] {
        defer { ready.removeAll(keepingCapacity: true) }
        return ready.elements
    }
}
