import VigilCore
import VigilGeo

/// One value of every case of `ClientOperation` and `CheckinOperation`, each with the name of
/// its case, for tests that check a classification of every operation against a table (issue 27
/// §3: a change of classification, or a new operation nobody classified, fails a test).
///
/// `caseName` is an exhaustive switch: a new case does not compile until it is named here, and
/// `OperationSamples.client`/`.checkin` must then hold a value of it (the tests check that the
/// samples name every case of the tables, and that every `metricIndex` is among them).
public enum OperationSamples {
    /// Every case of `CheckinOperation`, in `index` order.
    public static let checkin: [CheckinOperation] = [
        .create(labels: ["a", nil]),
        .open(circle: nil, ownerToken: "o"),
        .invite(circle: nil, ownerToken: "o", label: "b"),
        .revoke(circle: nil, ownerToken: "o", member: 1),
        .answer(circle: nil, ownerToken: "o", note: nil),
        .home(circle: nil, ownerToken: "o", change: .forSeconds(60)),
        .close(circle: nil, ownerToken: "o"),
        .join(circle: nil, memberToken: "m"),
        .request(circle: nil, memberToken: "m"),
        .leave(circle: nil),
        .register(circle: nil, credential: .member(token: "m"), target: .relay(handle: "h")),
        .unregister(circle: nil, credential: .owner(token: "o"), subscription: nil),
        .ack(circle: nil, credential: .member(token: "m"), notice: nil),
    ]

    /// Every case of `ClientOperation` but `.checkin`, then `.checkin` with every check-in operation.
    public static let client: [ClientOperation] = {
        let area = GeoArea.box(GeoBox(south: 52, west: 13, north: 53, east: 14))
        let here = PanicLocation(lat: 52.5, lon: 13.4)
        let kid = E2EKeyID(bytes: [UInt8](repeating: 7, count: 16))
        let sealed = SealedBytes(bytes: [9, 9, 9])
        let keys = E2EKeys(kid: kid, boxes: [MemberBox(member: 1, box: sealed)])
        let draft = PinDraft(point: GeoPoint(lat: 52.5, lon: 13.4), title: "t", description: "", category: "general", ttlSeconds: 60)
        let operations: [ClientOperation] = [
            .subscribe(area: area, categories: nil),
            .subscribeClusters(area: area, categories: nil),
            .unsubscribe,
            .pinCreate(draft),
            .pinUpdate(id: nil, token: "t", changes: PinChanges(title: "u")),
            .pinDelete(id: nil, token: "t"),
            .pinVote(id: nil, value: 1),
            .panicStart(status: .red, location: here, note: nil, watchers: 1, timer: nil),
            .panicStartE2E(status: .red, e2e: E2EStart(keys: keys, sealed: sealed), watchers: 1, timer: nil),
            .panicUpdate(stream: nil, ownerToken: "o", location: here),
            .panicUpdateSealed(stream: nil, ownerToken: "o",
                               update: SealedUpdate(point: SealedPoint(kid: kid, status: .amber, sealed: sealed), seq: 2)),
            .panicRekey(stream: nil, ownerToken: "o", keys: keys),
            .panicStatus(stream: nil, ownerToken: "o", status: .amber),
            .panicEnd(stream: nil, ownerToken: "o", reason: .safe),
            .panicResume(stream: nil, ownerToken: "o"),
            .panicWatch(stream: nil, watchToken: "w", since: nil),
            .panicWatchAsMember(stream: nil, memberToken: "m", since: nil),
            .panicUnwatch(stream: nil),
            .panicInvite(stream: nil, ownerToken: "o"),
            .panicRevoke(stream: nil, ownerToken: "o", watchToken: "w"),
            .panicTimer(stream: nil, ownerToken: "o", timer: .inSeconds(60)),
        ]
        return operations + checkin.map(ClientOperation.checkin)
    }()

    /// The case's name (a check-in operation by its wire name: they are classified one by one).
    public static func caseName(_ operation: ClientOperation) -> String {
        switch operation {
        case .subscribe: return "subscribe"
        case .subscribeClusters: return "subscribeClusters"
        case .unsubscribe: return "unsubscribe"
        case .pinCreate: return "pinCreate"
        case .pinUpdate: return "pinUpdate"
        case .pinDelete: return "pinDelete"
        case .pinVote: return "pinVote"
        case .panicStart: return "panicStart"
        case .panicStartE2E: return "panicStartE2E"
        case .panicUpdate: return "panicUpdate"
        case .panicUpdateSealed: return "panicUpdateSealed"
        case .panicRekey: return "panicRekey"
        case .panicStatus: return "panicStatus"
        case .panicEnd: return "panicEnd"
        case .panicResume: return "panicResume"
        case .panicWatch: return "panicWatch"
        case .panicWatchAsMember: return "panicWatchAsMember"
        case .panicUnwatch: return "panicUnwatch"
        case .panicInvite: return "panicInvite"
        case .panicRevoke: return "panicRevoke"
        case .panicTimer: return "panicTimer"
        case .checkin(let c): return CheckinOperation.names[c.index]
        }
    }
}
