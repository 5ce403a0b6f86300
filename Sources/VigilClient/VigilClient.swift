/// Placeholder while the package layout is checked.
public enum VigilClientVersion {
    public static let protocolVersion = 1
}
