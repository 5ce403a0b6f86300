/// The categories a store has seen, numbered in order of first use: index entries carry the
/// number (one byte) instead of the name, and a query turns its category mask into a table of
/// wanted tags once. A store only grows this table (a few names in practice: the configured
/// categories, and any a restored pin brought); names past 255 share the last tag.
struct CategoryTags: Sendable {
    static let overflow: UInt8 = 255
    private(set) var names: [String] = []
    private var tags: [String: UInt8] = [:]

    mutating func tag(_ name: String) -> UInt8 {
        if let tag = tags[name] { return tag }
        guard names.count < Int(Self.overflow) else { return Self.overflow }
        let tag = UInt8(names.count)
        names.append(name)
        tags[name] = tag
        return tag
    }

    /// For each tag, whether `categories` (bits of `settings.categories`) wants it; the
    /// overflow tag is not in the table (its pins are checked by name).
    func wanted(_ categories: UInt64, settings: PinSettings) -> [Bool] {
        names.map { name in settings.categoryIndex(name).map { categories & (1 << UInt64($0)) != 0 } ?? false }
    }
}
