#!/usr/bin/env python3
"""Reads the index.json of an Autobahn fuzzingclient report (wstest or kosoku) and says how it went.

usage: summarize.py [--expect N] [--fail-unimplemented] [--list N] REPORT
  REPORT                 the report's index.json, or the directory holding it
  --expect N             the number of cases the run was asked for (per agent); cases the
                         report lacks count as failed (wstest writes its report only at the end,
                         so a run cut short leaves cases out)
  --fail-unimplemented   count UNIMPLEMENTED as failed (by default it is reported, not failed)
  --list N               name at most N failed cases (default 50)

Prints, per agent, one line per case category with the count of each behaviour, the failed
cases, and as its last line:  autobahn: N ok, M failed of T
ok = OK, NON-STRICT or INFORMATIONAL; anything else (FAILED, UNIMPLEMENTED with
--fail-unimplemented, any other value) is failed, and so is a missing case.
Exit status: 0 when nothing failed, 1 when something did, 2 when the report cannot be read
(or holds no case and no --expect was given).
"""
import argparse
import json
import os
import sys
from collections import Counter

OK = ("OK", "NON-STRICT", "INFORMATIONAL")
SHOWN_ORDER = OK + ("UNIMPLEMENTED", "FAILED")

# The suite's category names (the first number of a case id).
CATEGORIES = {
    "1": "Framing",
    "2": "Pings/Pongs",
    "3": "Reserved bits",
    "4": "Opcodes",
    "5": "Fragmentation",
    "6": "UTF-8 handling",
    "7": "Close handling",
    "9": "Limits/performance",
    "10": "Miscellaneous",
    "12": "Compression, payloads",
    "13": "Compression, parameters",
}


def id_order(case_id):
    return [int(p) if p.isdigit() else 0 for p in case_id.split(".")]


def is_failure(behavior, fail_unimplemented):
    if behavior in OK:
        return False
    if behavior == "UNIMPLEMENTED":
        return fail_unimplemented
    return True


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "index.json")
    with open(path, encoding="utf-8") as f:
        index = json.load(f)
    if not isinstance(index, dict) or not all(isinstance(v, dict) for v in index.values()):
        raise ValueError("not an Autobahn index (expected {agent: {case: result}})")
    return index


def summarize_agent(agent, cases, args, out):
    """Prints one agent's part; returns (ok, failed, total) with missing cases counted."""
    behaviors = {cid: str(res.get("behavior", "?")) for cid, res in cases.items()}
    by_category = {}
    for cid, behavior in behaviors.items():
        by_category.setdefault(cid.split(".")[0], Counter())[behavior] += 1

    out(f"agent {agent}: {len(cases)} cases in the report")
    for cat in sorted(by_category, key=id_order):
        counts = by_category[cat]
        names = [b for b in SHOWN_ORDER if counts[b]] + sorted(set(counts) - set(SHOWN_ORDER))
        detail = ", ".join(f"{b} {counts[b]}" for b in names)
        out(f"  {cat:>2} {CATEGORIES.get(cat, '?'):<24} {sum(counts.values()):>4}: {detail}")

    failed = sorted((cid for cid, b in behaviors.items() if is_failure(b, args.fail_unimplemented)),
                    key=id_order)
    if failed:
        shown = ", ".join(
            f"{cid} ({behaviors[cid]}/{cases[cid].get('behaviorClose', '?')})" for cid in failed[: args.list]
        )
        more = f" and {len(failed) - args.list} more" if len(failed) > args.list else ""
        out(f"  failed: {shown}{more}")

    unimplemented = sum(1 for b in behaviors.values() if b == "UNIMPLEMENTED")
    if unimplemented and not args.fail_unimplemented:
        out(f"  {unimplemented} UNIMPLEMENTED, not counted as failed (--fail-unimplemented would)")

    ok = sum(1 for b in behaviors.values() if b in OK)
    total = len(cases)
    missing = 0
    if args.expect is not None:
        if total < args.expect:
            missing = args.expect - total
            out(f"  {missing} of the {args.expect} expected cases are missing from the report: counted as failed")
        elif total > args.expect:
            out(f"  note: {total} cases in the report, more than the {args.expect} expected")
    return ok, len(failed) + missing, total + missing


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--expect", type=int, metavar="N")
    ap.add_argument("--fail-unimplemented", action="store_true")
    ap.add_argument("--list", type=int, default=50, metavar="N")
    args = ap.parse_args(argv)

    try:
        index = load(args.report)
    except (OSError, ValueError) as e:
        print(f"autobahn: cannot read the report {args.report}: {e}", file=sys.stderr)
        return 2
    if not index:
        if args.expect is None:
            print(f"autobahn: the report {args.report} holds no case", file=sys.stderr)
            return 2
        index = {"(no agent)": {}}

    ok = failed = total = 0
    for agent in sorted(index):
        a_ok, a_failed, a_total = summarize_agent(agent, index[agent], args, print)
        ok, failed, total = ok + a_ok, failed + a_failed, total + a_total
    print(f"autobahn: {ok} ok, {failed} failed of {total}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
