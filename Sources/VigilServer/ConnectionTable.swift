/// The server's connections by fd, readable without reference counting on the fan-out's path.
///
/// Why a type of its own: an event reaches hundreds of recipients, and reading each one out of
/// an array of class references costs an atomic retain and release per recipient (the largest
/// user-space item in the fan-out profile after exclusivity checks). Here the table owns one
/// strong reference per slot, held by hand (`Unmanaged`), and `walk` lends each recipient to
/// the caller at +0 (`_withUnsafeGuaranteedRef`): no retain, no release.
///
/// What keeps that sound: a recipient's send may drop it (its send policy closes it, and the
/// server removes it from this table). During a walk a removed connection is parked in
/// `retiring` instead of released, so no object is freed under the walker; the walk's end
/// releases them. Walks do not nest (the fan-out may not re-enter itself), and nothing adds a
/// connection during one (accepts happen in the loop's I/O step, never inside a fan-out).
final class ConnectionTable: Sequence {
    private var slots: UnsafeMutablePointer<Unmanaged<Connection>?>
    private(set) var capacity: Int
    private var walking = false
    private var retiring: [Connection] = []

    init() {
        capacity = 0
        slots = UnsafeMutablePointer<Unmanaged<Connection>?>.allocate(capacity: 1)
    }

    deinit {
        for i in 0..<capacity { slots[i]?.release() }
        slots.deallocate()
    }

    /// The connection on `fd`, if any (a counted reference, for everything but the fan-out).
    subscript(fd: Int32) -> Connection? {
        let i = Int(fd)
        guard i >= 0, i < capacity else { return nil }
        return slots[i]?.takeUnretainedValue()
    }

    /// Puts `connection` on its fd's slot (empty: the fd was just accepted).
    func insert(_ connection: Connection) {
        precondition(!walking, "no connection is added during a walk")
        let i = Int(connection.fd)
        if i >= capacity { grow(to: Swift.max(i + 1, capacity + capacity / 2 + 64)) }
        slots[i]?.release()
        slots[i] = Unmanaged.passRetained(connection)
    }

    /// Empties `connection`'s slot if it holds that connection; returns whether it did.
    @discardableResult
    func remove(_ connection: Connection) -> Bool {
        let i = Int(connection.fd)
        guard i >= 0, i < capacity, let held = slots[i], held.toOpaque() == Unmanaged.passUnretained(connection).toOpaque() else {
            return false
        }
        slots[i] = nil
        if walking { retiring.append(connection) }  // the walker may still be inside it
        held.release()
        return true
    }

    /// Calls `body` with the open connection of each fd in `fds` (skipping closed ones), lent at
    /// +0: `body` may not keep the reference beyond its call.
    @inline(__always)
    func walk(_ fds: [Int32], _ body: (Connection) -> Void) {
        walking = true
        defer {
            walking = false
            if !retiring.isEmpty { retiring.removeAll() }
        }
        for fd in fds {
            let i = Int(fd)
            guard i < capacity, let slot = slots[i] else { continue }
            slot._withUnsafeGuaranteedRef(body)
        }
    }

    private func grow(to newCapacity: Int) {
        let grown = UnsafeMutablePointer<Unmanaged<Connection>?>.allocate(capacity: newCapacity)
        grown.moveInitialize(from: slots, count: capacity)
        (grown + capacity).initialize(repeating: nil, count: newCapacity - capacity)
        slots.deallocate()
        slots = grown
        capacity = newCapacity
    }

    /// Every slot, in fd order, as counted references (nil for an empty one).
    struct Iterator: IteratorProtocol {
        let table: ConnectionTable
        var index = 0
        mutating func next() -> Connection?? {
            guard index < table.capacity else { return nil }
            defer { index += 1 }
            return .some(table[Int32(index)])
        }
    }

    func makeIterator() -> Iterator { Iterator(table: self) }
}
