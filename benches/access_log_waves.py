#!/usr/bin/env python3
"""Where a held-streams run's slow streams lost their time, from Ringside's access log (a run of
benches/held_streams_oha.sh with KEEP_LOGS=DIR keeps one per run).

Usage: benches/access_log_waves.py LOG [SLOW_MS]

Prints the outcomes, how many requests needed more than one attempt, the time to first byte and
the relay (total minus first byte) at p50/p90/p99/max, and, for the first wave (the requests
that arrived in the first second), a histogram of the time to first byte in 250 ms steps: steps
near 1 s and 3 s are TCP's SYN retries at a full listen queue upstream. Then where the streams
slower than SLOW_MS (default: the p99 of every completed stream) arrived, by second.
"""
import json
import sys
from collections import Counter


def quantile(values, q):
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0


def spread(name, values):
    v = sorted(values)
    print(f"{name:>14}: p50 {quantile(v, .5)}  p90 {quantile(v, .9)}  "
          f"p99 {quantile(v, .99)}  max {v[-1] if v else 0} ms")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            if '"kind":"access"' not in line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if not rows:
        sys.exit("no access lines in " + sys.argv[1])
    ok = [r for r in rows if r.get("outcome") == "ok"]
    print(f"{len(rows)} requests: {dict(Counter(r.get('outcome') for r in rows))}")
    print(f"more than one attempt: {sum(1 for r in rows if len(r.get('attempts', [])) > 1)}")
    spread("first byte", [r["ttfb_ms"] for r in ok])
    spread("relay", [r["total_ms"] - r["ttfb_ms"] for r in ok])
    spread("stream", [r["total_ms"] for r in ok])
    arrived = {id(r): r["ts_ms"] - r["total_ms"] for r in rows}
    t0 = min(arrived.values())
    first = [r for r in ok if arrived[id(r)] - t0 < 1000]
    print(f"first wave: {len(first)} completed streams that arrived within 1 s of the first")
    for step, n in sorted(Counter(r["ttfb_ms"] // 250 * 250 for r in first).items()):
        print(f"  first byte {step:>6}-{step + 249} ms: {n}")
    totals = sorted(r["total_ms"] for r in ok)
    slow_ms = int(sys.argv[2]) if len(sys.argv) > 2 else quantile(totals, .99)
    slow = [r for r in ok if r["total_ms"] >= slow_ms]
    by_second = Counter((arrived[id(r)] - t0) // 1000 for r in slow)
    print(f"streams of {slow_ms} ms or more: {len(slow)}, arrived at second "
          + ", ".join(f"{s}: {n}" for s, n in sorted(by_second.items())))


if __name__ == "__main__":
    main()
