import VigilGeo

/// A decoded, validated client message.
public struct ClientRequest: Sendable {
    /// The client's `ref` (a string or a number), echoed in the reply.
    public var ref: JSONValue?
    public var operation: ClientOperation
}

/// The operations of protocol version 1 (docs/PROTOCOL.md).
public enum ClientOperation: Equatable, Sendable {
    case subscribe(area: GeoArea, categories: UInt64?)
    case unsubscribe
    case pinCreate(PinDraft)
    /// `id` is nil when the text is not a UUID: such a pin cannot exist, and the answer is the same as for an unknown one.
    case pinUpdate(id: PinID?, token: String, changes: PinChanges)
    case pinDelete(id: PinID?, token: String)
    case pinVote(id: PinID?, value: Int8)

    /// Writes count against the per-session write limit.
    public var isWrite: Bool {
        switch self {
        case .pinCreate, .pinUpdate, .pinDelete, .pinVote: return true
        case .subscribe, .unsubscribe: return false
        }
    }
}

/// A request that failed, with the `ref` it carried (when it could be read) for the error reply.
public struct RejectedRequest: Error, Sendable {
    public var ref: JSONValue?
    public var error: RequestError
}
