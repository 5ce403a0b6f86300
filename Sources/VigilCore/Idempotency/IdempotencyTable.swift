/// The answers kept for idempotency keys, bounded in time, in all and per client address.
///
/// A value (no clock, no I/O): the server inserts an answer when a write with a key succeeds,
/// looks the key up when a request with a key arrives, sweeps expired keys on its tick, and
/// exports the live answers into snapshots.
///
/// Order: every answer gets a number as it is inserted; answers expire in that order (one window
/// for all), so the oldest is always at the front of the global queue. When an address holds
/// `maxKeysPerAddress`, its own oldest is evicted first; when the table holds `maxKeys`, the
/// oldest of all is. Queues are cleaned lazily: an entry removed another way (taken back, evicted
/// through the other queue) leaves a stale number behind, skipped when it reaches the front, and
/// a queue is compacted when more than half of it is stale.
///
/// Addresses are the budgets' keyed hashes (`AddressKey`), in memory only: answers restored from
/// the state directory have none and count only against `maxKeys`.
public struct IdempotencyTable: Sendable {
    public let settings: IdempotencySettings

    struct Entry: Sendable {
        var answer: KeptAnswer
        var address: AddressKey?
        var order: UInt64
    }

    private var entries: [[UInt8]: Entry] = [:]
    private var all = OrderQueue()
    private var byAddress: [AddressKey: OrderQueue] = [:]
    private var nextOrder: UInt64 = 0
    /// Answers evicted to make room (not expired ones), for `vigil_idempotency_evicted_total`.
    public private(set) var evicted: UInt64 = 0
    /// Bytes of the answers held (digests and sealed answers).
    public private(set) var byteCount = 0

    public init(settings: IdempotencySettings = IdempotencySettings()) {
        self.settings = settings
    }

    public var count: Int { entries.count }

    /// The answer kept under `lookup`, unless it has expired at `now` (wall-clock unix ms).
    public func answer(_ lookup: [UInt8], now: Int64) -> KeptAnswer? {
        guard let entry = entries[lookup], !isExpired(entry.answer, now: now) else { return nil }
        return entry.answer
    }

    /// Keeps `answer` for `address` (nil: restored, no address), evicting as the bounds require.
    /// An answer already held under the same lookup is left as it is (a replayed record, or a
    /// snapshot and the journal both holding it): the first answer is the one kept. Returns
    /// whether it was inserted.
    @discardableResult
    public mutating func insert(_ answer: KeptAnswer, address: AddressKey?, now: Int64) -> Bool {
        guard entries[answer.lookup] == nil, !isExpired(answer, now: now) else { return false }
        guard settings.maxKeys > 0 else { return false }
        if let address, settings.maxKeysPerAddress > 0 {
            while (byAddress[address]?.live ?? 0) >= settings.maxKeysPerAddress, let oldest = popOldest(of: address) {
                remove(oldest)
                evicted += 1
            }
        }
        while entries.count >= settings.maxKeys, let oldest = popOldestOfAll() {
            remove(oldest)
            evicted += 1
        }
        let order = nextOrder
        nextOrder += 1
        entries[answer.lookup] = Entry(answer: answer, address: address, order: order)
        byteCount += answer.byteCount
        all.push(order, answer.lookup)
        if let address { byAddress[address, default: OrderQueue()].push(order, answer.lookup) }
        return true
    }

    /// Forgets the answer under `lookup` (a change taken back before it was recorded).
    public mutating func forget(_ lookup: [UInt8]) {
        remove(lookup)
    }

    /// Drops the answers expired at `now`; returns how many.
    @discardableResult
    public mutating func sweep(now: Int64) -> Int {
        var dropped = 0
        while let (order, lookup) = all.front() {
            guard let entry = entries[lookup], entry.order == order else { all.dropFront(); continue }
            guard isExpired(entry.answer, now: now) else { break }
            remove(lookup)
            dropped += 1
        }
        return dropped
    }

    /// The live answers at `now`, oldest first (a snapshot's list; restored in this order): a
    /// walk of the global queue, O(held), no sort.
    public func export(now: Int64) -> [KeptAnswer] {
        var out: [KeptAnswer] = []
        out.reserveCapacity(entries.count)
        all.forEach { order, lookup in
            if let entry = entries[lookup], entry.order == order, !isExpired(entry.answer, now: now) { out.append(entry.answer) }
        }
        return out
    }

    func isExpired(_ answer: KeptAnswer, now: Int64) -> Bool {
        answer.createdAt &+ settings.windowMs <= now
    }

    private mutating func remove(_ lookup: [UInt8]) {
        guard let entry = entries.removeValue(forKey: lookup) else { return }
        byteCount -= entry.answer.byteCount
        all.forgot()
        if let address = entry.address {
            byAddress[address]?.forgot()
            if byAddress[address]?.live == 0 { byAddress[address] = nil }
        }
        all.compactIfStale { [entries] in entries[$1]?.order == $0 }
        if let address = entry.address {
            byAddress[address]?.compactIfStale { [entries] in entries[$1]?.order == $0 }
        }
    }

    private mutating func popOldest(of address: AddressKey) -> [UInt8]? {
        while let (order, lookup) = byAddress[address]?.front() {
            if entries[lookup]?.order == order { return lookup }
            byAddress[address]?.dropFront()
        }
        return nil
    }

    private mutating func popOldestOfAll() -> [UInt8]? {
        while let (order, lookup) = all.front() {
            if entries[lookup]?.order == order { return lookup }
            all.dropFront()
        }
        return nil
    }
}

/// A FIFO of (order, lookup) with a moving head; `live` counts the entries still in the table.
struct OrderQueue: Sendable {
    private var items: [(UInt64, [UInt8])] = []
    private var head = 0
    private(set) var live = 0

    mutating func push(_ order: UInt64, _ lookup: [UInt8]) {
        items.append((order, lookup))
        live += 1
    }

    func front() -> (UInt64, [UInt8])? { head < items.count ? items[head] : nil }

    /// Every queued entry, stale ones included, oldest first.
    func forEach(_ body: (UInt64, [UInt8]) -> Void) {
        for i in head..<items.count { body(items[i].0, items[i].1) }
    }

    mutating func dropFront() {
        head += 1
        if head == items.count { items.removeAll(keepingCapacity: true); head = 0 }
    }

    /// One of its entries left the table (it stays queued until skipped or compacted).
    mutating func forgot() { live -= 1 }

    /// Rebuilds the queue without stale entries once they are more than half of it (amortised O(1)).
    mutating func compactIfStale(_ isLive: (UInt64, [UInt8]) -> Bool) {
        let held = items.count - head
        guard held > 32, live * 2 < held else { return }
        items = items[head...].filter { isLive($0.0, $0.1) }
        head = 0
    }
}
