import VigilState

/// Records the changes of a turn and makes them durable before the turn's replies leave.
///
/// `/v1` knows only this: the local journal (`Persistence`) is one implementation; a replicated
/// log would be another. The rule for every implementation: a reply is flushed only after
/// `commitTurn` has made the records of its turn as durable as their `Durability` requires, so
/// nothing is acknowledged that could be lost.
protocol ChangeLog: AnyObject {
    /// A change applied in this turn (appended in the order the changes were applied).
    func append(_ record: JournalRecord)
    /// The end of the turn, after the fan-out and before the flush: write the turn's records (and
    /// fsync them when their durability or the policy says so), as one group commit.
    func commitTurn()
}
