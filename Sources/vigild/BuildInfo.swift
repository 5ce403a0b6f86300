// The version and the commit `--version` prints. This committed file is the default (a build
// from a clone with `swift build`/`swift run`: commit "unknown"); `packaging/build-binaries`
// rewrites `commit` with `git describe` before a release build and restores this file after it.
// The version is read from here by the packaging scripts (the Debian version, the tarball name).
enum BuildInfo {
    static let version = "0.9.0"
    static let commit = "unknown"
    static var description: String { "\(version) (commit \(commit))" }
}
