import Testing
@testable import VigilWire

/// URLs taken apart into origin and target, and the ones refused.
@Suite struct OutgoingURLTests {
    @Test func accepted() throws {
        let cases: [(String, HTTPOrigin.Scheme, String, UInt16, String, String)] = [
            ("https://fcm.googleapis.com/fcm/send/abc:XYZ-_~", .https, "fcm.googleapis.com", 443, "/fcm/send/abc:XYZ-_~", "fcm.googleapis.com"),
            ("HTTPS://Push.Example:8443", .https, "push.example", 8443, "/", "push.example:8443"),
            ("https://push.example?q=1&r=%2F", .https, "push.example", 443, "/?q=1&r=%2F", "push.example"),
            ("https://[2001:DB8::1]:443/p", .https, "2001:db8::1", 443, "/p", "[2001:db8::1]"),
            ("https://192.0.2.7/", .https, "192.0.2.7", 443, "/", "192.0.2.7"),
            ("http://127.0.0.1:8080/hook", .http, "127.0.0.1", 8080, "/hook", "127.0.0.1:8080"),
            ("http://[::1]:9/", .http, "::1", 9, "/", "[::1]:9"),
            ("http://localhost/", .http, "localhost", 80, "/", "localhost"),
            ("https://xn--bcher-kva.example:00443/", .https, "xn--bcher-kva.example", 443, "/", "xn--bcher-kva.example"),
        ]
        for (text, scheme, host, port, target, authority) in cases {
            let url = try OutgoingURL(parsing: text)
            #expect(url.origin.scheme == scheme && url.origin.host == host && url.origin.port == port, "\(text)")
            #expect(url.target == target && url.origin.authority == authority, "\(text)")
        }
        #expect(try OutgoingURL(parsing: "https://[::1]/").origin.hostIsAddress)
        #expect(try !OutgoingURL(parsing: "https://localhost/").origin.hostIsAddress)
        #expect(try OutgoingURL(parsing: "https://a.example/x").origin == OutgoingURL(parsing: "https://A.example:443/y").origin)
        #expect(try OutgoingURL(parsing: "https://a.example/").origin.description == "https://a.example")
    }

    @Test func refused() {
        let cases: [(String, OutgoingURL.Problem)] = [
            ("ftp://a.example/", .scheme),
            ("https:/a.example/", .scheme),
            ("a.example/", .scheme),
            ("https://user:pw@a.example/", .userinfo),
            ("https://a.example/#frag", .fragment),
            ("https://a.example:/", .port),
            ("https://a.example:0/", .port),
            ("https://a.example:65536/", .port),
            ("https://a.example:123456/", .port),
            ("https://a.example:8x/", .port),
            ("https:///path", .host),
            ("https://a..example/", .host),
            ("https://-a.example/", .host),
            ("https://a_b.example/", .host),
            ("https://1.2.3/", .host),
            ("https://999.1.1.1/", .host),
            ("https://[::1/", .host),
            ("https://[fe80::1%25eth0]/", .host),
            ("https://[::1]x/", .host),
            ("https://[a.example]/", .host),
            ("https://a.example/a b", .path),
            ("https://a.example/%zz", .path),
            ("https://a.example/%4", .path),
            ("https://a.example/<script>", .path),
            ("https://a.example/\u{e9}", .path),
            ("http://a.example/", .plainHTTPNotLoopback),
            ("http://10.0.0.1/", .plainHTTPNotLoopback),
            ("https://a.example/" + String(repeating: "a", count: 5000), .tooLong),
        ]
        for (text, problem) in cases {
            #expect(throws: problem, "\(text.prefix(40))") { try OutgoingURL(parsing: text) }
        }
        // An at sign in the path is RFC 3986's, not userinfo.
        #expect((try? OutgoingURL(parsing: "https://a.example/p@x")) != nil)
    }

    @Test func problemsNeverQuoteTheURL() {
        let secret = "https://user:s3cret@a.example/#token"
        do {
            _ = try OutgoingURL(parsing: secret)
            Issue.record("accepted")
        } catch {
            #expect(!error.description.contains("s3cret") && !error.description.contains("token"))
        }
    }
}
