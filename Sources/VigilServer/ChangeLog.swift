import VigilState

/// Records the changes of a turn and makes them durable before the turn's replies leave.
///
/// `/v1` knows only this: the local journal (`Persistence`) is one implementation; a replicated
/// log would be another. The rule for every implementation: a reply is flushed only after
/// `commitTurn` has made the records of its turn as durable as their `Durability` requires, so
/// nothing is acknowledged that could be lost. When it cannot, it says so (`commitTurn` is
/// false) and `/v1` takes the turn's changes back and answers `unavailable`; while it still
/// cannot, `refusalRetryAfterMs` tells `/v1` to refuse changes before making them.
protocol ChangeLog: AnyObject {
    /// nil while changes can be recorded; else how long a refused writer should wait (the
    /// refusal is counted).
    func refusalRetryAfterMs() -> Int64?
    /// A change applied in this turn (appended in the order the changes were applied).
    func append(_ record: JournalRecord)
    /// The end of the turn, before the fan-out and the flush: write the turn's records (and
    /// fsync them when their durability or the policy says so), as one group commit. False when
    /// they could not be recorded: not one of them may be acknowledged or shown to anyone.
    func commitTurn() -> Bool
}
