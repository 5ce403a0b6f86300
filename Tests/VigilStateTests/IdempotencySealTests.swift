import Testing
@testable import VigilCore
@testable import VigilState

@Suite struct IdempotencySealTests {
    static let claim = IdempotencyClaim(key: "k3y-of-22-characters__", canonical: Array(#"{"op":"panic.start"}"#.utf8))
    static let members = Array(#","owner_token":"SECRET-owner","watch_tokens":["SECRET-w"]"#.utf8)

    @Test func aKeptAnswerOpensOnlyWithItsKey() throws {
        let kept = try #require(IdempotencySeal.keep(Self.members, claim: Self.claim, nonce: [UInt8](repeating: 7, count: 12), now: 5))
        #expect(kept.lookup == IdempotencySeal.lookup(key: Self.claim.key))
        #expect(kept.requestDigest == IdempotencySeal.requestDigest(Self.claim))
        #expect(kept.createdAt == 5 && kept.sealed.count == 12 + Self.members.count + 16)
        #expect(IdempotencySeal.open(kept, key: Self.claim.key) == Self.members)
        #expect(IdempotencySeal.open(kept, key: "another-key-of-22-char") == nil)
        // No byte of the secret shows in what is kept.
        let all = kept.lookup + kept.requestDigest + kept.sealed
        #expect(!String(decoding: all, as: UTF8.self).contains("SECRET"))
    }

    /// docs/LIMITS.md: a kept answer's journal record is 113 bytes plus the answer's members,
    /// its snapshot entry 104 plus them.
    @Test func aKeptAnswerTakes113BytesInTheJournalAnd104InASnapshotPlusTheAnswer() throws {
        for members in [Self.members, Array(#","seq":12345"#.utf8)] {
            let kept = try #require(IdempotencySeal.keep(members, claim: Self.claim, nonce: [UInt8](repeating: 3, count: 12), now: 1))
            #expect(JournalCodec.encode(.answerKept(kept)).count == 113 + members.count)
            var entry = StateWriter()
            KeptAnswerFields.write(kept, to: &entry)
            #expect(entry.bytes.count == 104 + members.count)
        }
    }

    @Test func anyChangedByteFailsToOpen() throws {
        let kept = try #require(IdempotencySeal.keep(Self.members, claim: Self.claim, nonce: [UInt8](repeating: 1, count: 12), now: 0))
        for i in [0, 11, 12, 20, kept.sealed.count - 1] {
            var damaged = kept
            damaged.sealed[i] ^= 0x01
            #expect(IdempotencySeal.open(damaged, key: Self.claim.key) == nil, "byte \(i)")
        }
        var moved = kept
        moved.lookup[0] ^= 1  // the lookup is the associated data: an answer cannot be moved to another key
        #expect(IdempotencySeal.open(moved, key: Self.claim.key) == nil)
        var short = kept
        short.sealed = Array(kept.sealed.prefix(27))
        #expect(IdempotencySeal.open(short, key: Self.claim.key) == nil)
    }

    @Test func freshNoncesGiveDifferentCiphertexts() throws {
        let a = try #require(IdempotencySeal.keep([], claim: Self.claim, nonce: [UInt8](repeating: 1, count: 12), now: 0))
        let b = try #require(IdempotencySeal.keep([], claim: Self.claim, nonce: [UInt8](repeating: 2, count: 12), now: 0))
        #expect(a.sealed != b.sealed)
        #expect(IdempotencySeal.open(a, key: Self.claim.key) == [] && IdempotencySeal.open(b, key: Self.claim.key) == [])
    }

    @Test func theRequestDigestDependsOnKeyAndRequest() {
        let other = IdempotencyClaim(key: Self.claim.key, canonical: Array(#"{"op":"panic.end"}"#.utf8))
        let otherKey = IdempotencyClaim(key: "k3y-of-22-characters_x", canonical: Self.claim.canonical)
        #expect(IdempotencySeal.requestDigest(other) != IdempotencySeal.requestDigest(Self.claim))
        #expect(IdempotencySeal.requestDigest(otherKey) != IdempotencySeal.requestDigest(Self.claim))
        #expect(IdempotencySeal.lookup(key: otherKey.key) != IdempotencySeal.lookup(key: Self.claim.key))
    }

    /// Journal and snapshot keep kept answers exactly, and the image keeps the first per lookup.
    @Test func keptAnswersSurviveJournalSnapshotAndReplay() throws {
        let a = try #require(IdempotencySeal.keep(Self.members, claim: Self.claim, nonce: [UInt8](repeating: 3, count: 12), now: 9))
        var later = a
        later.createdAt = 10
        let scan = JournalCodec.scan(JournalCodec.encode(.answerKept(a)) + JournalCodec.encode(.answerKept(later)))
        #expect(scan.records == [.answerKept(a), .answerKept(later)])
        var image = StateImage()
        image.apply(scan.records)
        #expect(image.keptAnswers == [a] && image.duplicateCount == 1)
        let snapshot = image.snapshot(takenAt: 1, journalSegment: 2)
        let decoded = try SnapshotCodec.decode(SnapshotCodec.encode(snapshot))
        #expect(decoded.keptAnswers == [a])
        #expect(StateImage(decoded).keptAnswers == [a])
    }

    @Test func aSealedLengthOutOfBoundsIsRefused() {
        var bytes = JournalCodec.encode(.answerKept(KeptAnswer(lookup: [UInt8](repeating: 1, count: 32), requestDigest: [UInt8](repeating: 2, count: 32),
                                                               createdAt: 1, sealed: [UInt8](repeating: 0, count: 28))))
        // The sealed length field sits after frame 8, kind 1, digests 64, created 8.
        bytes[8 + 1 + 64 + 8] = 27
        let payload = Array(bytes[8...])
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: payload) }
    }
}
