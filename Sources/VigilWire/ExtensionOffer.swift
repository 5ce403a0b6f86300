/// One element of a `Sec-WebSocket-Extensions` list (RFC 6455 §9.1): an extension name and its
/// parameters, in the order the client sent them.
///
/// It exists so that negotiation (`PerMessageDeflate`) reads parsed values and never bytes. It is
/// built once per upgrade request, so it holds plain strings; nothing here is on a message path.
public struct ExtensionOffer: Equatable, Sendable {
    /// The extension token, case kept (RFC 6455 names no case rule, so names compare exactly).
    public var name: String
    /// Parameters in order, duplicates kept: RFC 7692 §7 declines an offer that repeats one,
    /// so the parser must not merge them.
    public var parameters: [Parameter]

    /// `name` or `name=value`; a quoted-string value is stored unescaped (RFC 6455 §9.1: after
    /// unescaping it must itself be a token).
    public struct Parameter: Equatable, Sendable {
        public var name: String
        /// nil for a parameter without `=`.
        public var value: String?

        public init(name: String, value: String? = nil) {
            self.name = name
            self.value = value
        }
    }

    public init(name: String, parameters: [Parameter] = []) {
        self.name = name
        self.parameters = parameters
    }
}
