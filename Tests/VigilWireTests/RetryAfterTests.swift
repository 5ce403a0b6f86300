import Testing
@testable import VigilWire

/// HTTP-dates in their three forms, and Retry-After as a delay.
@Suite struct RetryAfterTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example.
    static let example: Int64 = 784_111_777

    @Test func theThreeDateForms() {
        let now: Int64 = 1_700_000_000  // November 2023
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT", nowUnixSeconds: now) == Self.example)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", nowUnixSeconds: now) == Self.example)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994", nowUnixSeconds: now) == Self.example)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT", nowUnixSeconds: now) == 0)
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 23:59:60 GMT", nowUnixSeconds: now) == 951_868_800)
        #expect(HTTPDate.parse("Wed, 31 Dec 2099x 23:59:59 GMT", nowUnixSeconds: now) == nil)
    }

    @Test func rfc850YearsAreAtMostFiftyYearsAhead() {
        let in2023: Int64 = 1_700_000_000
        // 73 → 2073 (50 years ahead at most), 74 → 1974.
        #expect(HTTPDate.parse("Monday, 01-Jan-73 00:00:00 GMT", nowUnixSeconds: in2023) == HTTPDate.seconds(year: 2073, month: 1, day: 1, (0, 0, 0)))
        #expect(HTTPDate.parse("Tuesday, 01-Jan-74 00:00:00 GMT", nowUnixSeconds: in2023) == HTTPDate.seconds(year: 1974, month: 1, day: 1, (0, 0, 0)))
    }

    @Test func malformedDates() {
        for text in ["", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 nov 1994 08:49:37 GMT",
                     "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                     "Sun, 06 Nov 1994 08:49:37 GMT ", "Funday, 06-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
                     "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT"] {
            #expect(HTTPDate.parse(text, nowUnixSeconds: 0) == nil, "\(text)")
        }
    }

    @Test func civilYears() {
        #expect(HTTPDate.civilYear(unixSeconds: 0) == 1970)
        #expect(HTTPDate.civilYear(unixSeconds: -1) == 1969)
        #expect(HTTPDate.civilYear(unixSeconds: 951_868_799) == 2000)
        #expect(HTTPDate.civilYear(unixSeconds: 1_700_000_000) == 2023)
    }

    @Test func delays() {
        let now = Self.example
        #expect(RetryAfter.delaySeconds("120", nowUnixSeconds: now) == 120)
        #expect(RetryAfter.delaySeconds(" 0 ", nowUnixSeconds: now) == 0)
        #expect(RetryAfter.delaySeconds("99999999999999999999999", nowUnixSeconds: now) == RetryAfter.maxSeconds)
        #expect(RetryAfter.delaySeconds("Sun, 06 Nov 1994 08:50:07 GMT", nowUnixSeconds: now) == 30)
        #expect(RetryAfter.delaySeconds("Sun, 06 Nov 1994 08:00:00 GMT", nowUnixSeconds: now) == 0)
        for bad in ["", "-1", "1.5", "soon", "12 s"] {
            #expect(RetryAfter.delaySeconds(bad, nowUnixSeconds: now) == nil, "\(bad)")
        }
    }
}
