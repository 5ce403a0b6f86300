import Testing
@testable import VigilHTTPClient

@Suite struct DestinationPolicyTests {
    @Test(arguments: [
        ("127.0.0.1", AddressScope.loopback), ("127.9.8.7", .loopback), ("::1", .loopback),
        ("10.0.0.1", .privateNetwork), ("172.16.0.1", .privateNetwork), ("172.31.255.255", .privateNetwork),
        ("172.32.0.1", .global), ("192.168.1.1", .privateNetwork), ("100.64.0.1", .privateNetwork), ("100.128.0.1", .global),
        ("169.254.169.254", .linkLocal), ("fe80::1", .linkLocal), ("fd00::1", .privateNetwork), ("fc00::1", .privateNetwork),
        ("0.0.0.0", .special), ("::", .special), ("224.0.0.1", .special), ("255.255.255.255", .special), ("ff02::1", .special),
        ("192.0.2.1", .special), ("2001:db8::1", .special),
        ("::ffff:127.0.0.1", .loopback), ("::ffff:10.1.2.3", .privateNetwork), ("::ffff:169.254.169.254", .linkLocal),
        ("64:ff9b::10.0.0.1", .privateNetwork), ("64:ff9b::8.8.8.8", .global),
        ("8.8.8.8", .global), ("2606:4700::1111", .global), ("142.250.0.1", .global),
    ])
    func scopes(_ address: String, _ scope: AddressScope) {
        #expect(AddressScope.of(address) == scope, "\(address)")
    }

    @Test func textThatIsNoAddressHasNoScopeAndIsRefused() {
        #expect(AddressScope.of("localhost") == nil)
        #expect(AddressScope.of("1.2.3") == nil)
        #expect(DestinationPolicy.publicOnly(allowLoopback: true).refusal(of: "not-an-address") == .special)
    }

    @Test func publicOnlyRefusesWhatTheOperatorDidNotAllow() {
        let strict = DestinationPolicy.publicOnly()
        #expect(strict.refusal(of: "8.8.8.8") == nil)
        #expect(strict.refusal(of: "127.0.0.1") == .loopback)
        #expect(strict.refusal(of: "169.254.169.254") == .linkLocal)
        #expect(strict.refusal(of: "::ffff:192.168.0.1") == .privateNetwork)
        let tests = DestinationPolicy.publicOnly(allowLoopback: true)
        #expect(tests.refusal(of: "127.0.0.1") == nil && tests.refusal(of: "10.0.0.1") == .privateNetwork)
        let lan = DestinationPolicy.publicOnly(allowPrivate: true)
        #expect(lan.refusal(of: "10.0.0.1") == nil && lan.refusal(of: "fe80::1") == nil && lan.refusal(of: "127.0.0.1") == .loopback)
        #expect(DestinationPolicy.any.refusal(of: "0.0.0.0") == nil)
    }
}
