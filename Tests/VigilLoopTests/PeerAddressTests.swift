import Testing
@testable import VigilLoop

/// Peer addresses, the prefixes of trusted proxies, and who X-Forwarded-For says the client is.
@Suite struct PeerAddressTests {
    func address(_ text: String) -> PeerAddress { PeerAddress(parsing: Substring(text))! }
    func prefixes(_ texts: String...) -> [AddressPrefix] { texts.map { AddressPrefix(parsing: $0)! } }

    @Test func parsesIPv4AsMappedIPv6AndIPv6() {
        #expect(address("192.0.2.7") == address("::ffff:192.0.2.7"))
        #expect(address("192.0.2.7").isIPv4 && !address("2001:db8::1").isIPv4)
        #expect(address(" 10.1.2.3 ") == address("10.1.2.3"))
        for bad in ["", "1.2.3", "1.2.3.4.5", "example.com", "1.2.3.4:80", "2001:db8::1::2", String(repeating: "1", count: 60)] {
            #expect(PeerAddress(parsing: Substring(bad)) == nil, "\(bad)")
        }
    }

    @Test func theKeyIsStableInAProcessAndDiffersBetweenAddresses() {
        #expect(address("192.0.2.7").key == address("192.0.2.7").key)
        #expect(address("192.0.2.7").key != address("192.0.2.8").key)
        #expect(address("::1").key != PeerAddress.localKey)
    }

    @Test func prefixesMatchBothFamilies() {
        let p = prefixes("10.0.0.0/8", "192.0.2.7", "2001:db8::/32")
        #expect(p.contains(address("10.200.3.4")) && !p.contains(address("11.0.0.1")))
        #expect(p.contains(address("192.0.2.7")) && !p.contains(address("192.0.2.8")))
        #expect(p.contains(address("2001:db8:ffff::9")) && !p.contains(address("2001:db9::1")))
        #expect(prefixes("0.0.0.0/0").contains(address("203.0.113.1")))
        for bad in ["10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/+8", "x/8", "10.0.0.0/"] {
            #expect(AddressPrefix(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func forwardedForTakesTheRightMostUntrustedHop() {
        let trusted = prefixes("10.0.0.0/8")
        // client, then two trusted proxies appended their peers.
        #expect(ForwardedFor.client(headers: ["203.0.113.9, 10.0.0.2", "10.0.0.3"], trusted: trusted) == address("203.0.113.9"))
        // A client that forges entries to the left cannot choose its key: the right-most untrusted wins.
        #expect(ForwardedFor.client(headers: ["1.1.1.1, 198.51.100.4"], trusted: trusted) == address("198.51.100.4"))
        // Garbage stops the walk at the last good hop.
        #expect(ForwardedFor.client(headers: ["not-an-ip, 10.0.0.7"], trusted: trusted) == address("10.0.0.7"))
        #expect(ForwardedFor.client(headers: [], trusted: trusted) == nil)
    }
}
