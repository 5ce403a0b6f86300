"""VigilClient as an app adds it: by version, from a tagged copy of this repository.

The consumer package here is what an iOS or server-side Swift developer writes:
``.package(url: …, from: "9.9.9", traits: [])`` and a dependency on the ``VigilClient`` product.
The test checks what SwiftPM 6.3 does with it:

* it resolves and builds (a version dependency is refused when a target in the used product's
  graph carries ``unsafeFlags``; the daemon's hot-path targets do);
* it fetches none of the daemon's package dependencies (they sit behind the ``Daemon`` trait, and
  ``traits: []`` turns it off) and compiles none of the daemon's modules;
* the example of clients/swift/README.md, pasted as it is, compiles and runs against a real
  vigild: a map model sees a pin created by another client, and a contact following a stream
  sees its updates.

The copy is made from the working tree (tracked files and new ones git does not ignore), so the
test checks what is about to be committed, not only the last commit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "clients" / "swift" / "README.md"
VERSION = "9.9.9"

# The modules an app's build may compile: the client and, on Linux, the wire code under its transport.
CLIENT_MODULES = {"App", "VigilClient", "VigilWire", "VigilBytes"}


def git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def tagged_copy(dest: Path) -> Path:
    """The working tree's files in a new repository at ``dest``, tagged ``VERSION``."""
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO).split("\0")
    for name in filter(None, files):
        source = REPO / name
        if not source.is_file():
            continue   # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    git("init", "-q", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "a release", cwd=dest)
    git("tag", VERSION, cwd=dest)
    return dest


def readme_example() -> str:
    """The Swift block that follows the README's "## Example" heading, exactly as a reader copies it."""
    text = README.read_text()
    section = text.split("\n## Example", 1)
    assert len(section) == 2, f"{README} has no '## Example' section"
    match = re.search(r"```swift\n(.*?)```", section[1], re.S)
    assert match, "the Example section has no ```swift block"
    return match.group(1)


ROOT_README = REPO / "README.md"
ROOT_MARKER = "<!-- Tests/e2e/test_swift_package.py compiles this block as it is, in a package that adds VigilClient by version -->"


def root_readme_example() -> str:
    """The repository README's shorter example (it leaves `draw`, `show`, `streamID` and
    `watchToken` to the app): the block right after its marker, compiled inside a function."""
    text = ROOT_README.read_text()
    assert text.count(ROOT_MARKER) == 1, f"README.md should hold the marker once: {ROOT_MARKER}"
    match = re.match(r"\s*```swift\n(.*?)```", text.split(ROOT_MARKER, 1)[1], re.S)
    assert match, "no ```swift block right after the README's marker"
    code = match.group(1).splitlines()
    imports = [line for line in code if line.startswith("import ")]
    body = ["    " + line for line in code if not line.startswith("import ")]
    return "\n".join(["import Foundation", *imports, "",
                      "func draw(_ change: MapEvent) {}", "func show(_ event: WatchEvent) {}", "",
                      "func rootReadmeExample(streamID: String, watchToken: String) async throws {",
                      *body, "}", ""])


def compiled_modules(build: Path) -> set[str]:
    """Modules with object files in a SwiftPM build folder."""
    debug = build / "debug"
    return {d.name[: -len(".build")] for d in debug.glob("*.build") if any(d.rglob("*.o"))}


CONSUMER_MANIFEST = """// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "App",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [.package(url: "file://{vigil}", from: "{version}", traits: [])],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "VigilClient", package: "vigil")])],
    swiftLanguageModes: [.v6]
)
"""


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    """A consumer package of a tagged copy, built with the README's example as its main.swift
    (and the repository README's shorter one compiled beside it)."""
    if shutil.which("swift") is None:
        pytest.skip("swift is not installed")
    root = tmp_path_factory.mktemp("swiftpkg")
    vigil = tagged_copy(root / "vigil")
    app = root / "app"
    (app / "Sources" / "App").mkdir(parents=True)
    (app / "Package.swift").write_text(CONSUMER_MANIFEST.replace("{vigil}", str(vigil)).replace("{version}", VERSION))
    (app / "Sources" / "App" / "main.swift").write_text(readme_example())
    (app / "Sources" / "App" / "RootReadme.swift").write_text(root_readme_example())
    build = subprocess.run(["swift", "build"], cwd=app, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, f"the consumer did not build:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
    return app


def test_the_consumer_resolves_only_this_package(consumer):
    resolved = json.loads((consumer / "Package.resolved").read_text())
    pins = {p["identity"] for p in resolved.get("pins", [])}
    assert pins == {"vigil"}, f"resolved {pins}: the daemon's dependencies must stay behind the Daemon trait"
    checkouts = {p.name for p in (consumer / ".build" / "checkouts").iterdir()}
    assert checkouts == {"vigil"}, f"checked out {checkouts}"


def test_the_consumer_compiles_only_the_client(consumer):
    modules = compiled_modules(consumer / ".build")
    assert "VigilClient" in modules and "App" in modules
    assert modules <= CLIENT_MODULES, f"compiled beyond the client: {sorted(modules - CLIENT_MODULES)}"


def test_the_readme_example_runs_against_vigild(consumer, vigild):
    d = vigild()
    run = subprocess.run([str(consumer / ".build" / "debug" / "App"), f"ws://127.0.0.1:{d.port}/v1"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = run.stdout.splitlines()
    assert any(line.startswith("map: added(") and "Fox in the park" in line for line in lines), run.stdout
    contact = [line for line in lines if line.startswith("contact: ")]
    assert contact[0].startswith("contact: state("), contact
    assert any(line.startswith("contact: location(") for line in contact), contact
    assert contact[-1].startswith("contact: ended("), contact
