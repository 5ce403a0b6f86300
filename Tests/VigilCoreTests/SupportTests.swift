import Testing
@testable import VigilCore
import VigilTestSupport

@Suite struct PinIDTests {
    @Test func isAVersion4UUIDAndRoundTrips() {
        let secrets = TestSecrets()
        for _ in 0..<200 {
            let id = PinID(random: secrets.randomBytes(16))
            let text = id.description
            #expect(text.count == 36)
            let chars = Array(text)
            #expect(chars[14] == "4", "version nibble")
            #expect("89ab".contains(chars[19]), "variant nibble")
            #expect(PinID(text) == id)
            #expect(PinID(text.uppercased()) == id)
        }
    }

    @Test func rejectsAnythingElse() {
        for bad in ["", "9b2f0c1e4a7d4f439a510d6f7c3e8b12", "9b2f0c1e-4a7d-4f43-9a51-0d6f7c3e8b1", "9b2f0c1e-4a7d-4f43-9a51-0d6f7c3e8b123",
                    "9b2f0c1e-4a7d-4f43-9a51_0d6f7c3e8b12", "zb2f0c1e-4a7d-4f43-9a51-0d6f7c3e8b12"] {
            #expect(PinID(bad) == nil, "\(bad)")
        }
    }
}

@Suite struct TokenDigestTests {
    @Test func matchesOnlyTheSameDigest() {
        let s = TestSecrets()
        let a = s.digest(ofToken: "alpha"), b = s.digest(ofToken: "alphb")
        #expect(a.matches(s.digest(ofToken: "alpha")))
        #expect(!a.matches(b))
        #expect(TokenDigest(bytes: a.bytes) == a)
    }

    @Test func tokensAre256RandomBitsInBase64URL() {
        let s = TestSecrets()
        let token = s.newToken()
        #expect(token.count == 43)
        #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(s.newToken() != token)
    }

    @Test func base64URLVectors() {
        // RFC 4648 §10 vectors, in the URL alphabet without padding.
        #expect(Base64URL.encode(Array("".utf8)) == "")
        #expect(Base64URL.encode(Array("f".utf8)) == "Zg")
        #expect(Base64URL.encode(Array("fo".utf8)) == "Zm8")
        #expect(Base64URL.encode(Array("foo".utf8)) == "Zm9v")
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
    }
}

@Suite struct TokenBucketTests {
    @Test func allowsTheBurstThenRefillsAtTheRate() {
        var bucket = TokenBucket(capacity: 3, perMinute: 60, nowMs: 0)  // one a second
        #expect(bucket.take(nowMs: 0) == nil)
        #expect(bucket.take(nowMs: 0) == nil)
        #expect(bucket.take(nowMs: 0) == nil)
        let wait = bucket.take(nowMs: 0)
        #expect(wait == 1000)
        #expect(bucket.take(nowMs: 400) == 600)
        #expect(bucket.take(nowMs: 1000) == nil)
        #expect(bucket.take(nowMs: 1000) != nil)
    }

    @Test func neverHoldsMoreThanItsCapacity() {
        var bucket = TokenBucket(capacity: 2, perMinute: 600, nowMs: 0)
        var allowed = 0
        for _ in 0..<10 where bucket.take(nowMs: 3_600_000) == nil { allowed += 1 }
        #expect(allowed == 2)
    }

    @Test func sustainedRateMatchesPerMinute() {
        var bucket = TokenBucket(capacity: 1, perMinute: 30, nowMs: 0)
        var allowed = 0
        var now: Int64 = 0
        while now < 60_000 {
            if bucket.take(nowMs: now) == nil { allowed += 1 }
            now += 7
        }
        #expect(allowed >= 30 && allowed <= 31, "got \(allowed)")
    }
}

@Suite struct TokenLevelTests {
    /// The retry time is exact for any rate: a take at `now + retry` succeeds and one a
    /// millisecond earlier does not, whatever fraction of a token time has earned meanwhile.
    @Test func retryAfterIsExact() {
        var rng = SplitMix64(state: 77)
        for _ in 0..<300 {
            let rate = TokenRate(capacity: 1 + Int(rng.next() % 20), refill: 1 + Int(rng.next() % 700),
                                 periodMs: [1_000, 60_000, 3_600_000, 7][Int(rng.next() % 4)])
            var level = TokenLevel(full: rate, nowMs: 0)
            var now: Int64 = Int64(rng.next() % 1_000)
            for _ in 0..<60 {
                now += Int64(rng.next() % 3_000)
                guard let retry = level.take(rate, nowMs: now) else { continue }
                #expect(retry >= 1)
                var early = level, onTime = level
                #expect(early.take(rate, nowMs: now + retry - 1) != nil, "\(rate): a token before the retry time")
                #expect(onTime.take(rate, nowMs: now + retry) == nil, "\(rate): no token at the retry time")
            }
        }
    }

    /// Over a long run the bucket grants exactly the burst plus the rate, never more.
    @Test func grantsTheBurstPlusTheRateExactly() {
        let rate = TokenRate.perHour(600, capacity: 200)          // one every 6 s
        var level = TokenLevel(full: rate, nowMs: 0)
        var granted = 0
        var now: Int64 = 0
        var last: Int64 = 0
        while now <= 3_600_000 {
            while level.take(rate, nowMs: now) == nil { granted += 1 }
            last = now
            now += 997                                            // not a divisor of 6 s: fractions carry over
        }
        #expect(granted == 200 + Int(last / 6_000))
    }

    /// A bucket idle for years refills to its capacity, no more, with no overflow; `fullAt` says
    /// when an emptied one is full again.
    @Test func longIdleAndFullAt() {
        let rate = TokenRate.perSecond(200, capacity: 1_000)
        var level = TokenLevel(full: rate, nowMs: 5)
        for _ in 0..<1_000 { #expect(level.take(rate, nowMs: 5) == nil) }
        #expect(level.take(rate, nowMs: 5) == 5)
        #expect(level.fullAt(rate) == 5 + 5_000)
        #expect(level.tokens(rate, nowMs: 5 + 2_500) == 500)
        #expect(level.tokens(rate, nowMs: Int64(1) << 60) == 1_000)
        #expect(level.fullAt(rate) == Int64(1) << 60)
    }
}

