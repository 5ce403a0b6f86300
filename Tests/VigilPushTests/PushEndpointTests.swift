import Testing
@testable import VigilPush

/// Endpoint URLs: the origin a VAPID `aud` names (default ports left out, host lowercased, IPv6
/// bracketed), the request target, and the refusals: another scheme, http beyond loopback or
/// without the tests' permission, user info, bad hosts and ports, fragments, oversized URLs.
@Suite struct PushEndpointTests {
    @Test func realEndpoints() throws {
        let fcm = try PushEndpoint("https://fcm.googleapis.com/fcm/send/dG9rZW4:APA91b")
        #expect(fcm.origin == "https://fcm.googleapis.com")
        #expect(fcm.host == "fcm.googleapis.com" && fcm.port == 443 && fcm.usesTLS)
        #expect(fcm.requestTarget == "/fcm/send/dG9rZW4:APA91b")
        let mozilla = try PushEndpoint("HTTPS://Updates.Push.Services.Mozilla.com:443/wpush/v2/gAAAAABk")
        #expect(mozilla.origin == "https://updates.push.services.mozilla.com")
        #expect(mozilla.hostHeader == "updates.push.services.mozilla.com")
    }

    @Test func portsQueriesAndEmptyPaths() throws {
        let other = try PushEndpoint("https://push.example.net:8443/p?x=1&y=2")
        #expect(other.origin == "https://push.example.net:8443")
        #expect(other.hostHeader == "push.example.net:8443")
        #expect(other.requestTarget == "/p?x=1&y=2")
        #expect(try PushEndpoint("https://push.example.net").requestTarget == "/")
        #expect(try PushEndpoint("https://push.example.net?q").requestTarget == "/?q")
        #expect(try PushEndpoint("https://192.0.2.7:443/x").origin == "https://192.0.2.7")
    }

    @Test func ipv6() throws {
        let endpoint = try PushEndpoint("https://[2001:DB8::1]:8443/p")
        #expect(endpoint.host == "2001:db8::1")
        #expect(endpoint.origin == "https://[2001:db8::1]:8443")
        #expect(try PushEndpoint("https://[2001:db8::1]/p").origin == "https://[2001:db8::1]")
    }

    @Test func loopbackHTTPOnlyWhenAllowed() throws {
        let local = try PushEndpoint("http://127.0.0.1:5000/push/1", allowLoopbackHTTP: true)
        #expect(local.origin == "http://127.0.0.1:5000" && !local.usesTLS && local.port == 5000)
        #expect(try PushEndpoint("http://localhost/x", allowLoopbackHTTP: true).origin == "http://localhost")
        #expect(try PushEndpoint("http://[::1]:8080/", allowLoopbackHTTP: true).origin == "http://[::1]:8080")
        #expect(try PushEndpoint("http://127.9.9.9:80/", allowLoopbackHTTP: true).origin == "http://127.9.9.9")
        #expect(throws: PushEndpointError.schemeNotAllowed("http")) { try PushEndpoint("http://127.0.0.1:5000/push/1") }
        #expect(throws: PushEndpointError.schemeNotAllowed("http")) { try PushEndpoint("http://push.example.net/", allowLoopbackHTTP: true) }
        #expect(throws: PushEndpointError.schemeNotAllowed("http")) { try PushEndpoint("http://127.0.0.1.example.net/", allowLoopbackHTTP: true) }
    }

    @Test func refusals() {
        let cases: [(String, PushEndpointError)] = [
            ("ftp://push.example.net/", .schemeNotAllowed("ftp")),
            ("push.example.net/x", .malformed("no scheme")),
            ("https:/push.example.net/x", .malformed("no scheme")),
            ("https://user:pw@push.example.net/", .userInfo),
            ("https://push.example.net@evil.example/", .userInfo),
            ("https:///x", .badHost("")),
            ("https://push..example.net/", .badHost("push..example.net")),
            ("https://push_example.net/", .badHost("push_example.net")),
            ("https://[::1/x", .badHost("[::1")),
            ("https://[zz::1]/x", .badHost("zz::1")),
            ("https://push.example.net:0/", .badPort("0")),
            ("https://push.example.net:65536/", .badPort("65536")),
            ("https://push.example.net:/", .badPort("")),
            ("https://push.example.net:+443/", .badPort("+443")),
            ("https://a:b:c/", .badPort("b:c")),
            ("https://push.example.net/a b", .malformed("a space, a control or a non-ASCII character")),
            ("https://exämple.net/", .malformed("a space, a control or a non-ASCII character")),
            ("https://push.example.net/x#frag", .malformed("a fragment")),
        ]
        for (url, error) in cases {
            #expect(throws: error, "\(url)") { try PushEndpoint(url) }
        }
        let long = "https://push.example.net/" + String(repeating: "a", count: PushEndpoint.maxByteCount)
        #expect(throws: PushEndpointError.tooLong(long.utf8.count)) { try PushEndpoint(long) }
    }
}
