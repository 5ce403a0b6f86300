import Testing
@testable import VigilCore

/// The welcome on the wire (docs/PROTOCOL.md, "Sessions").
@Suite struct ServerMessagesTests {
    func parse(_ w: JSONWriter) throws -> JSONObject {
        try #require(w.withUnsafeBytes { try JSONParser.parse($0, maxDepth: 16) }.object)
    }

    func welcomeLimits(_ settings: PinSettings, _ limits: ServerMessages.Limits) throws -> JSONObject {
        var w = JSONWriter(capacity: 1024)
        ServerMessages.welcome(session: "s", settings: settings, limits: limits, into: &w)
        let o = try parse(w)
        #expect(o["type"]?.string == "welcome" && o["session"]?.string == "s" && o["protocol"]?.int64 == 1)
        return try #require(o["limits"]?.object)
    }

    /// Every cap on a text a client sends, characters and bytes, as configured: each value differs
    /// from its default and from the others, so a cap written from the wrong setting shows.
    @Test func theWelcomeAnnouncesEveryTextCap() throws {
        var pins = PinSettings()
        pins.titleMaxCharacters = 81
        pins.titleMaxBytes = 601
        pins.descriptionMaxCharacters = 1_001
        pins.descriptionMaxBytes = 7_001
        var panic = PanicSettings()
        panic.noteMaxCharacters = 281
        panic.noteMaxBytes = 2_001
        var checkin = CheckinSettings()
        checkin.labelMaxCharacters = 41
        checkin.labelMaxBytes = 301
        checkin.noteMaxCharacters = 282
        checkin.noteMaxBytes = 2_002
        let limits = try welcomeLimits(pins, ServerMessages.Limits(maxMessageBytes: 65_536, messagesPerSecond: 50, messageBurst: 100,
                                                                   panic: panic, checkin: checkin))
        let expected: [(String, Int64)] = [
            ("title_max_chars", 81), ("title_max_bytes", 601), ("description_max_chars", 1_001), ("description_max_bytes", 7_001),
            ("panic_note_max_chars", 281), ("panic_note_max_bytes", 2_001),
            ("checkin_label_max_chars", 41), ("checkin_label_max_bytes", 301),
            ("checkin_note_max_chars", 282), ("checkin_note_max_bytes", 2_002),
        ]
        for (key, value) in expected {
            #expect(limits[key]?.int64 == value, "\(key)")
        }
    }

    /// The defaults, as docs/PROTOCOL.md's welcome shows them, and the limits that were there before.
    @Test func theDefaultsAreTheDocumentedOnes() throws {
        let limits = try welcomeLimits(PinSettings(), ServerMessages.Limits(maxMessageBytes: 65_536, messagesPerSecond: 50, messageBurst: 100))
        let expected: [(String, Int64)] = [
            ("max_message_bytes", 65_536), ("title_max_chars", 80), ("title_max_bytes", 640),
            ("description_max_chars", 1_000), ("description_max_bytes", 8_000),
            ("vote_flag_threshold", 5), ("writes_per_minute", 30), ("write_burst", 30), ("messages_per_second", 50), ("message_burst", 100),
            ("max_subscribe_pins", 10_000), ("max_range_m", 50_000),
            ("panic_note_max_chars", 280), ("panic_note_max_bytes", 2_240),
            ("checkin_label_max_chars", 40), ("checkin_label_max_bytes", 320),
            ("checkin_note_max_chars", 280), ("checkin_note_max_bytes", 2_240),
        ]
        for (key, value) in expected {
            #expect(limits[key]?.int64 == value, "\(key)")
        }
        #expect(limits["categories"]?.array?.compactMap(\.string) == PinSettings().categories)
        #expect(limits["ttl_s"]?.object?["default"]?.int64 == 14_400)
    }
}
