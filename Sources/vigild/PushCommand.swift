import ArgumentParser
import Foundation
import VigilPush

/// `vigild push ...`: the application server's Web Push identity (RFC 8292 VAPID). The key is made
/// once per deployment: browsers subscribe with its public key, and a subscription made for one key
/// cannot be used with another, so `keygen` never writes over a file.
struct PushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "Tools for Web Push: the VAPID key.",
        subcommands: [Keygen.self, PublicKey.self])

    struct Keygen: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keygen",
            abstract: "Generate the VAPID key into FILE (P-256, PKCS#8 PEM, mode 0600) and print its public key (exit 0 ok, 1 not).",
            discussion: "The printed key (unpadded base64url, 87 characters) is the applicationServerKey the web pages subscribe with. An existing FILE is never replaced: every subscription made for its key would end.")

        @Argument(help: ArgumentHelp("Where to write the key; must not exist.", valueName: "file"))
        var file: String

        func run() throws {
            do {
                print(try VAPIDKeyFile.create(file).publicKey.base64URL)
            } catch {
                FileHandle.standardError.write(Data("vigild push keygen: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }

    struct PublicKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "public-key",
            abstract: "Print the public key (applicationServerKey, base64url) of a VAPID key file, PKCS#8 or SEC1 PEM (exit 0 ok, 1 not).")

        @Argument(help: ArgumentHelp("A VAPID key file.", valueName: "file"))
        var file: String

        func run() throws {
            do {
                print(try VAPIDKeyFile.read(file).publicKey.base64URL)
            } catch {
                FileHandle.standardError.write(Data("vigild push public-key: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}
