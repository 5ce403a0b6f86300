/// What `MapHub.vote` did, with what the server needs to journal exactly that: a vote that
/// changed the counts is journaled as the vote itself (`JournalRecord.pinVote`), one that flagged
/// the pin away as its removal, one that changed nothing not at all. (Journaling the whole pin
/// after every vote made the journal grow with the square of a pin's votes.)
public struct VoteOutcome: Equatable, Sendable {
    public enum Change: Equatable, Sendable {
        /// The voter had this vote already: nothing changed, nothing was delivered.
        case unchanged
        /// The vote was recorded (new, or replacing the voter's other value); the pin stays.
        case counted
        /// The vote took `down - up` to the flag threshold: the pin is gone for everyone.
        case flagged
    }

    public var change: Change
    /// The pin as it now is; for `flagged`, its last state (with the vote that flagged it).
    public var pin: Pin
    public var voter: UInt64
    public var value: Int8

    public init(change: Change, pin: Pin, voter: UInt64, value: Int8) {
        self.change = change
        self.pin = pin
        self.voter = voter
        self.value = value
    }
}
