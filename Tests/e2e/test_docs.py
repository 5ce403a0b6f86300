"""The documentation against itself and against the code: markdown tables that render as tables,
and the facts the docs state that a program can check (here, or with a live vigild where a
test says so).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vigilproc import REPO

MARKDOWN = sorted([REPO / "README.md", REPO / "clients/js/README.md", REPO / "Tests/e2e/README.md",
                   *(REPO / "docs").rglob("*.md")])
DELIMITER_CELL = re.compile(r"^\s*:?-{3,}:?\s*$")


def cells(line: str) -> list[str]:
    """The cells of a row-shaped line (`| a | b |`); a pipe escaped as `\\|` stays in its cell."""
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def is_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def prose_lines(path: Path):
    """(line number, line) of a markdown file outside fenced and indented code blocks."""
    fence = None
    previous_blank = True
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.lstrip()
        marker = stripped[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        if line.startswith("    ") and previous_blank and not is_row(line):
            continue  # an indented code block's first line (the block goes on until a blank line)
        previous_blank = not line.strip() or (line.startswith("    ") and previous_blank)
        yield number, line


def tables(path: Path):
    """Every table of a file as (first line, column count, rows), and every row-shaped line that
    belongs to no table as (line, column count of the table last closed above it or None)."""
    found, orphans = [], []
    lines = list(prose_lines(path))
    i = 0
    last_columns = None
    while i < len(lines):
        number, line = lines[i]
        following = lines[i + 1][1] if i + 1 < len(lines) and lines[i + 1][0] == number + 1 else ""
        if is_row(line) and is_row(following) and all(DELIMITER_CELL.match(c) for c in cells(following)):
            header = cells(line)
            rows = [(number, header)]
            i += 2
            while i < len(lines) and lines[i][0] == lines[i - 1][0] + 1 and is_row(lines[i][1]):
                rows.append((lines[i][0], cells(lines[i][1])))
                i += 1
            found.append((number, len(header), rows))
            last_columns = len(header)
            continue
        if is_row(line):
            orphans.append((number, last_columns))
        i += 1
    return found, orphans


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_every_table_is_contiguous(path):
    """A prose line between two rows ends the table: the rows after it render as plain text. So
    every row-shaped line must belong to a table (a header, a delimiter row, then rows with no
    other line between them), and each row must have the header's number of cells."""
    found, orphans = tables(path)
    problems = [f"line {n}: a table row outside any table" + (f" (the table above it has {cols} columns: a line between its rows cut it)" if cols else "")
                for n, cols in orphans]
    for start, columns, rows in found:
        problems += [f"line {n}: {len(row)} cells in a table of {columns} (line {start})" for n, row in rows if len(row) != columns]
    assert not problems, f"{path.relative_to(REPO)}:\n" + "\n".join(problems)


def test_the_table_check_finds_a_cut_table(tmp_path):
    """The check itself, on the mistake it exists for: prose between two rows of one table."""
    doc = tmp_path / "cut.md"
    doc.write_text("| request | reply |\n| --- | --- |\n| `a` | `ok` |\nA paragraph that belongs after the table.\n| `b` | `ok` |\n\n"
                   "```\n| not | a table |\n```\n")
    found, orphans = tables(doc)
    assert [(start, columns, len(rows)) for start, columns, rows in found] == [(1, 2, 2)]
    assert orphans == [(5, 2)]


def section(path: Path, title: str) -> str:
    """The text of the `## title` section of a markdown file (to the next `## `)."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def compression_answers() -> list[tuple[str, str | int | None]]:
    """PROTOCOL.md's table of offers and answers: (offer, the answer header, 400, or None for no
    extension agreed)."""
    doc = REPO / "docs/PROTOCOL.md"
    body = section(doc, "Compression (permessage-deflate)")
    rows = []
    for line in body.splitlines():
        if not is_row(line) or DELIMITER_CELL.match(cells(line)[0]) or "client offers" in line:
            continue
        offer_cell, answer_cell = cells(line)
        offer = re.match(r"`([^`]+)`", offer_cell).group(1)
        answer = re.match(r"`(permessage-deflate[^`]*)`", answer_cell)
        rows.append((offer, answer.group(1) if answer else 400 if "`400`" in answer_cell else None))
    assert rows, "PROTOCOL.md has no table of permessage-deflate offers and answers"
    return rows


def test_protocol_md_states_the_negotiation_a_live_daemon_answers(vigild):
    """Each offer of PROTOCOL.md's compression table, made to a vigild on its built-in compression
    settings, gets exactly the answer the table gives."""
    from wsraw import RawConn, upgrade_request

    d = vigild({})
    rows = compression_answers()
    assert any(answer is None for _, answer in rows) and any(isinstance(a, str) for _, a in rows)
    wrong = []
    for offer, expected in rows:
        c = RawConn.connect(d.port)
        with c:
            request = upgrade_request("/v1")
            c.send(request[:-2] + f"Sec-WebSocket-Extensions: {offer}\r\n\r\n".encode())
            response = c.read_response()
        got = 400 if response.status == 400 else response.header("sec-websocket-extensions")
        if response.status not in (101, 400) or got != expected:
            wrong.append(f"offer {offer!r}: the doc says {expected!r}, vigild answered {response.status} {got!r}")
    assert not wrong, "\n".join(wrong)


def autobahn_shards() -> list[tuple[str, str, str, str, int]]:
    """The shards Tests/autobahn runs with no arguments: (name, ws:// or wss://, cases, excluded, expected)."""
    script = (REPO / "Tests/autobahn").read_text()
    default_run = script[script.index("if [ $# -eq 0 ]; then"):script.index("\nelse\n", script.index("if [ $# -eq 0 ]; then"))]
    shards = re.findall(r'^\s*shard (\S+) "\$(WSS?)" "([^"]*)" "([^"]*)" (\d+)$', default_run, re.M)
    assert shards, "no shard lines found in Tests/autobahn"
    assert re.search(r'WS="ws://[^"]*" WSS="wss://', script), "Tests/autobahn: WS and WSS are no longer ws:// and wss://"
    return [(name, url.lower() + "://", cases, exclude, int(n)) for name, url, cases, exclude, n in shards]


def test_readme_states_the_autobahn_cases_the_script_runs():
    """README's table of Autobahn shards is the script's, and the totals it gives in prose (README
    and the script's own header) are the sums over ws:// and wss://."""
    readme = (REPO / "README.md").read_text()
    found, _ = tables(REPO / "README.md")
    table = next((rows for _, _, rows in found if rows[0][1][:3] == ["shard", "over", "cases"]), None)
    assert table, "README.md has no table of the Autobahn shards (shard | over | cases | without | cases expected)"
    documented = [(c[0].strip("`"), c[1], c[2].strip("`"), c[3].strip("`"), int(c[4])) for _, c in table[1:]]
    shards = autobahn_shards()
    assert documented == shards, f"README: {documented}\nTests/autobahn: {shards}"
    over_ws = sum(n for _, url, _, _, n in shards if url == "ws://")
    over_wss = sum(n for _, url, _, _, n in shards if url == "wss://")
    assert (over_ws, over_wss) == (517, 301), "the suite changed size: update README and this test"
    section = " ".join(readme[readme.index("Autobahn (`Tests/autobahn`)"):].split())
    assert f"{over_ws} over ws://" in section and f"the {over_wss} core cases again over wss://" in section
    assert f"all {over_ws} cases over ws://, the {over_wss} core ones over wss://" in readme
    header = (REPO / "Tests/autobahn").read_text().split("set -euo", 1)[0]
    assert f"({over_ws}:" in header and f"({over_wss}:" in header
    assert "but the compression cases" not in readme


DEFAULT_LISTENERS = {"server": "127.0.0.1:8080", "admin": "127.0.0.1:8081"}


def three_node_example() -> tuple[list[dict], str]:
    """CLUSTER.md's nodes on one machine: the config its shell loop writes for each `n`, and the
    text around it."""
    import yaml

    body = section(REPO / "docs/CLUSTER.md", "A three-node cluster on one machine")
    loop = re.search(r"for n in ([\d ]+); do\n(.*?)\n\s*done\n", body, re.S)
    assert loop, "CLUSTER.md: no `for n in ...; do ... done` loop in the three-node example"
    heredoc = re.search(r"cat > \S+ <<EOF\n(.*?)\n\s*EOF\n", loop.group(2) + "\n", re.S)
    assert heredoc and "vigild --config" in loop.group(2), "the loop no longer writes a config and starts vigild with it"
    template = "\n".join(line[4:] for line in heredoc.group(1).splitlines())
    nodes = [yaml.safe_load(template.replace("$n", n)) for n in loop.group(1).split()]
    assert len(nodes) >= 3
    return nodes, body


def listeners(node: dict) -> dict[str, str]:
    """A node's listeners, the defaults where its config has none."""
    out = {}
    for section_name in ("server", "admin", "tls"):
        value = (node.get(section_name) or {}).get("listen", DEFAULT_LISTENERS.get(section_name))
        if value not in (None, False, "off", ""):
            out[f"{section_name}.listen"] = str(value)
    return out


def collide(a: str, b: str) -> bool:
    host_a, port_a = a.rsplit(":", 1)
    host_b, port_b = b.rsplit(":", 1)
    wildcard = {"0.0.0.0", "[::]", ""}
    return port_a == port_b != "0" and (host_a == host_b or host_a in wildcard or host_b in wildcard)


def test_the_cluster_example_gives_each_node_on_one_machine_its_own_listeners():
    nodes, body = three_node_example()
    taken = [(i + 1, key, address) for i, node in enumerate(nodes) for key, address in listeners(node).items()]
    clashes = [f"node {n} {k} {a} and node {m} {l} {b}" for x, (n, k, a) in enumerate(taken)
               for (m, l, b) in taken[x + 1:] if collide(a, b)]
    assert not clashes, "CLUSTER.md's nodes on one machine share a listener: " + "; ".join(clashes)
    # Clear of the defaults, which another vigild on the machine (or a node whose admin.listen
    # was left out) takes.
    for n, key, address in taken:
        for default in DEFAULT_LISTENERS.values():
            assert not collide(address, default), f"node {n}'s {key} {address} is a default listener ({default})"
    # The addresses the text sends the reader to are the nodes'.
    ws = {a for _, k, a in taken if k == "server.listen"}
    admin = {a for _, k, a in taken if k == "admin.listen"}
    for url in re.findall(r"ws://([\d.]+:\d+)/v1", body):
        assert url in ws, f"CLUSTER.md opens ws://{url}/v1, which is no node's server.listen {sorted(ws)}"
    for port in re.findall(r"`:(\d+)`", body):
        assert f"127.0.0.1:{port}" in ws, f"CLUSTER.md names :{port}, which is no node's server.listen"
    for address in re.findall(r"curl -s ([\d.]+:\d+)/", body):
        assert address in admin, f"CLUSTER.md curls {address}, which is no node's admin.listen {sorted(admin)}"


def test_every_config_key_the_docs_name_exists(vigild_binary, tmp_path):
    """A `section.key_with_underscore` in the docs, the config files' comments or vigild's help is
    a key vigild reads (or a field of the welcome's `limits`, PROTOCOL.md's example): the keys are
    those `vigild --print-config` prints, the cluster section's among them."""
    import subprocess

    import yaml

    node = tmp_path / "node.yaml"
    node.write_text("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  tls:\n")
    printed = yaml.safe_load(subprocess.run([str(vigild_binary), "--print-config", "--config", str(node)],
                                            capture_output=True, text=True, timeout=10, check=True).stdout)
    keys = {f"{s}.{k}" for s, body in printed.items() for k in body}
    # cluster.tls prints only what is set: its keys as --check-config lists them for an unknown one.
    node.write_text("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  tls:\n    mystery: 1\n")
    refusal = subprocess.run([str(vigild_binary), "--check-config", str(node)], capture_output=True, text=True, timeout=10).stderr
    known = re.search(r"known in cluster\.tls: ([a-z_, ]+)\)", refusal)
    assert known, refusal
    keys |= {f"cluster.tls.{k}" for k in known.group(1).split(", ")}
    welcome = re.search(r'"limits":\{(.*?)\}\}', (REPO / "docs/PROTOCOL.md").read_text(), re.S).group(1)
    keys |= {f"limits.{k}" for k in re.findall(r'"([a-z_]+)":', welcome)}
    token = re.compile(r"\b((?:%s)\.[a-z_]+(?:\.[a-z_]+)?)\b" % "|".join(printed))
    help_text = subprocess.run([str(vigild_binary), "state", "inspect", "--help"], capture_output=True, text=True, timeout=10).stdout
    sources = [(path.relative_to(REPO), path.read_text()) for path in MARKDOWN + [REPO / "config/vigild.yaml", REPO / "config/test.yaml"]]
    sources.append(("vigild state inspect --help", help_text))
    unknown = [f"{name}:{n}: {t}" for name, text in sources for n, line in enumerate(text.splitlines(), 1)
               for t in token.findall(line) if "_" in t.split(".", 1)[1] and t not in keys]
    assert not unknown, "config keys vigild does not have:\n" + "\n".join(unknown)
