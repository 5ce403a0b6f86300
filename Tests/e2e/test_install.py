"""The Debian package installed on a fresh Debian root, as an operator would (issue 28 §4).

One test, bounded (asserted under 10 minutes, the package build included):

1. the package: ``VIGIL_DEB`` (Tests/run-all builds it with packaging/build-deb) or, when that is
   not set, ``packaging/build-deb`` run here;
2. a fresh Debian root: ``mmdebstrap --variant=minbase`` of this machine's suite from
   deb.debian.org, made once and kept in ``.build-deb-cache/SUITE-minbase`` (git-ignored), copied
   for each run; it holds no Swift toolchain, so everything below also shows the binary runs with
   the toolchain out of sight;
3. ``apt-get install ./vigil_*.deb`` inside it (Depends resolved from the mirror: libssl3, zlib,
   libjs-leaflet); the files land where the package says;
4. the operator's edit of the conffile (``web.enabled: true``), the state directory laid out as
   systemd's ``DynamicUser=yes`` + ``StateDirectory=vigil`` do, then the unit's own ExecStartPre
   and ExecStart lines run in the root (chroot, a mount namespace of their own) as an
   unprivileged user (uid 61234, like a dynamic user), with VIGIL_LISTEN/VIGIL_ADMIN_LISTEN set
   to port 0 on loopback so no fixed port is needed;
5. from the host over loopback: ``/healthz`` on the admin listener, a pin round trip over ws://
   (one client subscribes, another creates a pin, the first sees ``pin.added``), Leaflet served
   from the Debian copy (/vendor/leaflet/leaflet.js) and a page; SIGTERM, exit 0, and a snapshot
   in the state directory;
6. ``apt-get purge vigil`` then ``apt-get autoremove --purge``: every file the install, the
   config edit or the daemon made is gone, but what Debian keeps (apt's and dpkg's own records,
   logs, caches).

Skipped, with the reason, only without root (chroot, mounts, mmdebstrap --mode=root) or without
a route to the Debian mirror; a missing tool fails it (Tests/setup-deps installs them).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from pinclient import PinClient
from vigilproc import ADMIN_LISTEN_RE, LISTEN_RE

REPO = Path(__file__).resolve().parents[2]
MIRROR_HOST = "deb.debian.org"
MIRROR = f"http://{MIRROR_HOST}/debian"
BUDGET_S = 600
UID = 61234
# What Debian keeps after a purge (records, caches, logs of apt and dpkg), and the pseudo
# filesystems: not compared.
KEPT = re.compile(r"^(proc|sys|dev|run|tmp|var/cache/(apt|debconf|ldconfig)|var/lib/(apt|dpkg|systemd/deb-systemd-helper-enabled|systemd/deb-systemd-helper-masked|ucf)|var/log|etc/ld\.so\.cache)(/|$)")


def suite() -> str:
    fields = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    name = fields.get("VERSION_CODENAME", "").strip('"')
    if not name:
        pytest.fail("/etc/os-release names no VERSION_CODENAME: cannot choose the Debian suite")
    return name


def mirror_reachable() -> bool:
    try:
        with socket.create_connection((MIRROR_HOST, 80), timeout=5):
            return True
    except OSError:
        return False


def run(cmd, *, timeout=300, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{cmd!r} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def in_root(root: Path, script: str, *, timeout=300, check=True) -> subprocess.CompletedProcess:
    """``script`` (sh) run as root inside ``root``, with /proc and /dev mounted in a mount namespace
    of its own (nothing stays mounted after it)."""
    wrapper = (f'mount -t proc proc "{root}/proc" && mount --rbind /dev "{root}/dev" && '
               f'exec chroot "{root}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin '
               f'DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 /bin/sh -ec "$0"')
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", wrapper, script],
                          capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"in the root: {script}\nexit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


def files_of(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel
        if rel and KEPT.match(rel):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            path = f"{rel}/{name}" if rel else name
            if not KEPT.match(path):
                out.add(path)
    return out


def unit_line(unit: str, key: str) -> str:
    lines = [line.split("=", 1)[1] for line in unit.splitlines() if line.startswith(key + "=")]
    assert len(lines) == 1, f"the unit has {len(lines)} {key}= lines"
    return lines[0]


def wait_for(path: Path, rx: re.Pattern, deadline: float, proc: subprocess.Popen) -> re.Match:
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        m = rx.search(text)
        if m:
            return m
        if proc.poll() is not None:
            pytest.fail(f"vigild exited {proc.returncode} before {rx.pattern!r}:\n{text[-4000:]}")
        time.sleep(0.1)
    pytest.fail(f"no {rx.pattern!r} in vigild's log:\n{path.read_text(errors='replace')[-4000:]}")


def test_deb_installs_runs_and_purges_on_a_fresh_debian(tmp_path):
    started = time.monotonic()
    if os.geteuid() != 0:
        pytest.skip("needs root: mmdebstrap --mode=root, chroot and mounts in a mount namespace")
    if not mirror_reachable():
        pytest.skip(f"no route to the Debian mirror {MIRROR_HOST}:80 (the fresh root and the package's Depends come from it)")
    for tool in ("mmdebstrap", "dpkg-deb", "unshare", "chroot"):
        assert shutil.which(tool), f"{tool} is missing: run Tests/setup-deps"

    # 1. the package
    deb = os.environ.get("VIGIL_DEB")
    if not deb:
        deb = run([str(REPO / "packaging/build-deb")], timeout=BUDGET_S).stdout.strip().splitlines()[-1]
    deb = Path(deb)
    assert deb.is_file() and deb.name.startswith("vigil_") and deb.suffix == ".deb", deb
    fields = run(["dpkg-deb", "--field", str(deb), "Depends"]).stdout
    assert "libjs-leaflet" in fields and "libc6" in fields, f"Depends: {fields}"
    assert "swift" not in fields.lower(), f"the package depends on Swift: {fields}"

    # 2. a fresh root (the cache is made once)
    name = suite()
    cache = REPO / ".build-deb-cache" / f"{name}-minbase"
    if not (cache / "usr/bin/apt-get").exists():
        partial = cache.with_name(cache.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        run(["mmdebstrap", "--variant=minbase", "--mode=root", name, str(partial), MIRROR], timeout=BUDGET_S)
        shutil.rmtree(cache, ignore_errors=True)
        partial.rename(cache)
    root = tmp_path / "root"
    try:
        run(["cp", "-a", str(cache), str(root)])
        assert not (root / "opt/swift").exists() and not list(root.glob("usr/lib/**/libswiftCore.so")), \
            "the fresh root holds a Swift toolchain"
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        shutil.copy(deb, root / "tmp" / deb.name)
        in_root(root, "apt-get update -q")
        before = files_of(root)

        # 3. install, with the Depends from the mirror
        in_root(root, f"apt-get install -y -q --no-install-recommends ./tmp/{deb.name}", timeout=BUDGET_S)
        for path in ("usr/bin/vigild", "usr/bin/vigil-load", "etc/vigil/vigild.yaml", "lib/systemd/system/vigild.service",
                     "usr/share/vigil/web/map.html", "usr/share/man/man1/vigild.1.gz", "usr/share/man/man1/vigil-load.1.gz",
                     "usr/share/doc/vigil/copyright", "usr/share/doc/vigil/OPERATIONS.md",
                     "usr/share/javascript/leaflet/leaflet.js"):
            assert (root / path).exists(), f"/{path} not installed"
        # enabled at install (deb-systemd-helper), not started: the operator edits the config first
        wants = root / "etc/systemd/system/multi-user.target.wants/vigild.service"
        assert wants.is_symlink() and os.readlink(wants) == "/lib/systemd/system/vigild.service", "vigild.service not enabled"
        conffiles = in_root(root, "cat /var/lib/dpkg/info/vigil.conffiles").stdout.split()
        assert conffiles == ["/etc/vigil/vigild.yaml"], conffiles
        assert not list((root / "usr/share/vigil/web").rglob("leaflet*.js")), "a vendored Leaflet is in the package"
        for binary in ("vigild", "vigil-load"):
            dynamic = run(["readelf", "-d", str(root / "usr/bin" / binary)]).stdout
            needed = sorted(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
            assert "libc.so.6" in needed and "libssl.so.3" in needed, needed
            assert not [n for n in needed if "swift" in n.lower() or "Foundation" in n or "dispatch" in n.lower()], needed
            assert "RUNPATH" not in dynamic and "RPATH" not in dynamic, dynamic
        version = in_root(root, "vigild --version").stdout.strip()
        assert re.fullmatch(r"\d+\.\d+\.\d+ \(commit [0-9A-Za-z._-]+\)", version), version
        assert "unknown" not in version, f"the packaged binary does not name its commit: {version}"

        # 4. the operator's edit, the state directory as systemd makes it, the unit's own lines
        config = root / "etc/vigil/vigild.yaml"
        text = config.read_text()
        web = text.index("\nweb:\n")
        at = text.index("  enabled: false", web)
        config.write_text(text[:at] + "  enabled: true" + text[at + len("  enabled: false"):])
        unit = (root / "lib/systemd/system/vigild.service").read_text()
        assert unit_line(unit, "ExecReload") == "/bin/kill -HUP $MAINPID"
        assert "DynamicUser=yes" in unit and "StateDirectory=vigil" in unit
        in_root(root, f"mkdir -p -m 0700 /var/lib/private/vigil && chown {UID}:{UID} /var/lib/private/vigil && "
                      "ln -s private/vigil /var/lib/vigil")
        user = f"--userspec={UID}:{UID}"
        pre = unit_line(unit, "ExecStartPre")
        check = in_root(root, f"exec chroot {user} / {pre}", check=False)
        assert check.returncode == 0, f"ExecStartPre {pre}: {check.stdout}{check.stderr}"
        exec_start = unit_line(unit, "ExecStart")
        assert exec_start.startswith("/usr/bin/vigild "), exec_start
        log = tmp_path / "vigild.log"
        wrapper = (f'mount -t proc proc "{root}/proc" && mount --rbind /dev "{root}/dev" && '
                   f'exec chroot {user} "{root}" /usr/bin/env -i VIGIL_LISTEN=127.0.0.1:0 '
                   f'VIGIL_ADMIN_LISTEN=127.0.0.1:0 {exec_start}')
        with open(log, "wb") as out:
            daemon = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", wrapper],
                                      stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            port = int(wait_for(log, LISTEN_RE, deadline, daemon).group(2))
            admin = int(wait_for(log, ADMIN_LISTEN_RE, deadline, daemon).group(2))
            uid = int(Path(f"/proc/{daemon.pid}/status").read_text().split("\nUid:")[1].split()[0])
            assert uid == UID, f"vigild runs as uid {uid}"

            # 5. from the host, on loopback
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/healthz", timeout=5) as r:
                assert r.status == 200, r.status
            with PinClient(port) as watcher, PinClient(port) as writer:
                assert watcher.subscribe_bbox(47.0, 8.0, 48.0, 9.0) == []
                pin, _ = writer.create(47.37, 8.54, title="installed")
                event = watcher.event()
                assert event["type"] == "pin.added" and event["pin"]["id"] == pin["id"], event
                assert event["pin"]["title"] == "installed"
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/vendor/leaflet/leaflet.js", timeout=5) as r:
                body = r.read()
            # Debian's minified build (vigild serves it as leaflet.js), read inside the root: its
            # links are absolute, into /usr/share/nodejs.
            debian_copy = in_root(root, "sha256sum /usr/share/javascript/leaflet/leaflet.min.js").stdout.split()[0]
            assert hashlib.sha256(body).hexdigest() == debian_copy, "the Leaflet served is not Debian's copy"
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/map", timeout=5) as r:
                assert r.status == 200 and b"<html" in r.read().lower()
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=20) == 0, log.read_text()[-4000:]
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
        state = list((root / "var/lib/private/vigil").iterdir())
        assert state, "vigild left nothing in its state directory (a snapshot at shutdown)"

        # 6. purge
        in_root(root, "apt-get purge -y -q vigil && apt-get autoremove --purge -y -q", timeout=BUDGET_S)
        # /var/lib/private is systemd's (the parent of every DynamicUser= service's state, made here
        # as systemd would): it stays, empty.
        assert os.listdir(root / "var/lib/private") == [], os.listdir(root / "var/lib/private")
        after = files_of(root) - {"var/lib/private"}
        left = sorted(after - before)
        assert left == [], f"left behind after purge: {left}"
        gone = sorted(after ^ before)
        assert gone == [], f"the root differs from before the install: {gone}"
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], timeout=120)
    elapsed = time.monotonic() - started
    print(f"install test: {elapsed:.0f} s")
    assert elapsed < BUDGET_S, f"the install test took {elapsed:.0f} s (budget {BUDGET_S} s)"
