import Foundation

/// What a ``PositionFollower`` did with a position.
public enum FollowerEvent: Sendable, Equatable {
    /// Sent at `at` (the clock's time) and answered with this seq.
    case sent(seq: Int, Position, at: Duration)
    /// Sent at `at` and refused (the next position is sent as usual).
    case failed(VigilError, Position, at: Duration)
}

/// Sends a location feed to a stream as `panic.update` at a bounded rate: at most one every
/// `minInterval`, the newest position winning, never one while the previous is unanswered.
/// Made by ``PanicOwner/follow(_:minInterval:)``.
public actor PositionFollower {
    let owner: PanicOwner
    let minInterval: Duration
    let clock: any VigilClock
    var pending: Position?
    var inFlight = false
    var lastSentAt: Duration?
    var timer: Task<Void, Never>?
    var feed: Task<Void, Never>?
    var stopped = false
    /// How many positions the feed gave.
    var offered = 0
    let continuation: AsyncStream<FollowerEvent>.Continuation
    /// What was sent, and its answers, in order: one consumer.
    public nonisolated let events: AsyncStream<FollowerEvent>

    init<S: AsyncSequence & Sendable>(owner: PanicOwner, positions: S, minInterval: Duration, clock: any VigilClock) where S.Element == Position {
        self.owner = owner
        self.minInterval = minInterval
        self.clock = clock
        (events, continuation) = AsyncStream<FollowerEvent>.makeStream()
        Task { await self.start(positions) }
    }

    func start<S: AsyncSequence & Sendable>(_ positions: S) where S.Element == Position {
        guard !stopped else { return }
        feed = Task {
            do {
                for try await p in positions { self.offer(p) }
            } catch {}
        }
    }

    /// Takes a position (the newest wins).
    func offer(_ p: Position) {
        guard !stopped else { return }
        offered += 1
        pending = p
        if timer == nil { pump() }
    }

    func pump() {
        timer = nil
        guard !stopped, !inFlight, let update = pending else { return }
        if let last = lastSentAt {
            let due = last + minInterval
            if clock.now < due {
                timer = Task { [clock] in
                    do { try await clock.sleep(until: due) } catch { return }
                    self.pump()
                }
                return
            }
        }
        pending = nil
        inFlight = true
        let at = clock.now
        lastSentAt = at
        let owner = self.owner
        Task {
            do throws(VigilError) {
                let seq = try await owner.update(update)
                self.done(.sent(seq: seq, update, at: at))
            } catch {
                self.done(.failed(error, update, at: at))
            }
        }
    }

    func done(_ e: FollowerEvent) {
        inFlight = false
        continuation.yield(e)
        pump()
    }

    /// Stops following: the feed is no longer read, nothing more is sent.
    public func stop() {
        stopped = true
        timer?.cancel()
        feed?.cancel()
        continuation.finish()
    }
}
