/// HTTP-date (RFC 9110 §5.6.7) read into Unix seconds: the preferred IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms a recipient must still accept,
/// RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
///
/// Pure, no locale and no time-zone database: the forms are fixed English and always GMT. The
/// day name is checked to be one, not to match the date (§5.6.7 lets a recipient ignore it).
public enum HTTPDate {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    static let shortDays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

    /// The time `text` names, in seconds since 1970 (UTC), or nil when it is none of the three
    /// forms. `nowUnixSeconds` places RFC 850's two-digit year: the most recent year ending in
    /// those digits that is not more than 50 years ahead.
    public static func parse(_ text: String, nowUnixSeconds: Int64) -> Int64? {
        var cursor = Cursor(Array(text.utf8))
        if let day = cursor.word(), cursor.take(","), cursor.take(" ") {
            if shortDays.contains(day) {
                // IMF-fixdate: DD SP Mon SP YYYY SP time SP GMT
                guard let d = cursor.number(2), cursor.take(" "), let m = cursor.month(), cursor.take(" "),
                      let y = cursor.number(4), cursor.take(" "), let t = cursor.time(), cursor.take(" GMT"), cursor.atEnd
                else { return nil }
                return seconds(year: y, month: m, day: d, t)
            }
            guard longDays.contains(day) else { return nil }
            // RFC 850: DD-Mon-YY SP time SP GMT
            guard let d = cursor.number(2), cursor.take("-"), let m = cursor.month(), cursor.take("-"),
                  let yy = cursor.number(2), cursor.take(" "), let t = cursor.time(), cursor.take(" GMT"), cursor.atEnd
            else { return nil }
            let currentYear = civilYear(unixSeconds: nowUnixSeconds)
            var y = currentYear - currentYear % 100 + yy
            if y > currentYear + 50 { y -= 100 }
            return seconds(year: y, month: m, day: d, t)
        }
        // asctime: Day SP Mon SP (DD / SP D) SP time SP YYYY
        cursor = Cursor(Array(text.utf8))
        guard let day = cursor.word(), shortDays.contains(day), cursor.take(" "), let m = cursor.month(), cursor.take(" ")
        else { return nil }
        let d: Int
        if cursor.take(" ") {
            guard let one = cursor.number(1) else { return nil }
            d = one
        } else {
            guard let two = cursor.number(2) else { return nil }
            d = two
        }
        guard cursor.take(" "), let t = cursor.time(), cursor.take(" "), let y = cursor.number(4), cursor.atEnd else { return nil }
        return seconds(year: y, month: m, day: d, t)
    }

    /// Seconds since 1970 of a checked civil date and time; nil for a day the month does not have.
    static func seconds(year: Int, month: Int, day: Int, _ time: (h: Int, m: Int, s: Int)) -> Int64? {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day >= 1, day <= lengths[month - 1] else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return days * 86_400 + Int64(time.h * 3600 + time.m * 60 + time.s)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = Int64((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The Gregorian year a Unix time falls in (Hinnant's `civil_from_days`, year only).
    static func civilYear(unixSeconds: Int64) -> Int {
        let z = (unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let month = mp < 10 ? mp + 3 : mp - 9
        return Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0))
    }

    /// A read position in the text, each step taking exactly the bytes its form allows.
    private struct Cursor {
        let bytes: [UInt8]
        var at = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { at == bytes.count }

        /// Takes `literal` when the text continues with it.
        mutating func take(_ literal: String) -> Bool {
            let l = Array(literal.utf8)
            guard bytes.count - at >= l.count, bytes[at..<(at + l.count)].elementsEqual(l) else { return false }
            at += l.count
            return true
        }

        /// Letters up to the next non-letter (a day name).
        mutating func word() -> String? {
            let start = at
            while at < bytes.count, (bytes[at] | 0x20) >= UInt8(ascii: "a"), (bytes[at] | 0x20) <= UInt8(ascii: "z") { at += 1 }
            return at > start ? String(decoding: bytes[start..<at], as: UTF8.self) : nil
        }

        /// Exactly `digits` digits.
        mutating func number(_ digits: Int) -> Int? {
            guard bytes.count - at >= digits else { return nil }
            var value = 0
            for c in bytes[at..<(at + digits)] {
                guard let d = HTTPSyntax.digit(c) else { return nil }
                value = value * 10 + d
            }
            at += digits
            return value
        }

        /// A month's three letters, as 1-12 (case-sensitive, as the grammar is).
        mutating func month() -> Int? {
            guard bytes.count - at >= 3 else { return nil }
            let name = String(decoding: bytes[at..<(at + 3)], as: UTF8.self)
            guard let index = HTTPDate.months.firstIndex(of: name) else { return nil }
            at += 3
            return index + 1
        }

        /// `HH:MM:SS`, 60 allowed as a leap second.
        mutating func time() -> (h: Int, m: Int, s: Int)? {
            guard let h = number(2), h < 24, take(":"), let m = number(2), m < 60, take(":"), let s = number(2), s <= 60
            else { return nil }
            return (h, m, s)
        }
    }
}
