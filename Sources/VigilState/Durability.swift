import VigilCore

/// How soon a journal record must be on disk, decided once per kind of record (not per call site).
public enum Durability: Sendable, Equatable {
    /// Handed to the kernel before the turn's replies go out (so it survives the process being
    /// killed), and fsynced as `state.fsync` says: pins, and a stream's location updates.
    case standard
    /// Also fsynced before the turn's replies, whatever `state.fsync` says: the life of a panic
    /// stream (start, status, safety timer, missed check-in, end) and who may watch it (contacts added or cut),
    /// and every change of a check-in circle (a request, the "safe" answer, home safe, members). Losing one of
    /// these to a power cut would tell a contact that someone is safe who is not, or the reverse.
    case critical
}

extension JournalRecord {
    public var durability: Durability {
        switch self {
        // A settlement lost to a power cut costs one notice sent again (at least once allows it).
        case .pinPut, .pinRemove, .pinVote, .panicRemove, .circleRemove, .noticeSettled:
            return .standard
        case .panicEvent(_, let event):
            if event.kind.isLocation { return .standard }
            return .critical
        case .panicStart, .panicInvite, .panicRevoke, .panicRekey:
            return .critical
        // A circle's requests and answers ("safe"), its home safe and who may read it.
        case .circlePut:
            return .critical
        // "Mum has seen it": losing it would tell the person in danger nobody has, and escalate.
        case .noticeAcked:
            return .critical
        // Written with the change it answers: it is synced when that change is.
        case .answerKept:
            return .standard
        }
    }
}
