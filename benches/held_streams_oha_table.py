"""The table of benches/held_streams_oha.sh: one row per target and round, and with ROUNDS > 1 a
summary: per target the median of each figure, and Ringside's CPU per event against HAProxy's
round by round (the two ran about half a minute apart), by both counts of events.

Two counts of events: oha's (51 per stream it saw end within the run, as oha reports it) and
the upstream mock's (every event it wrote, the streams cut at the run's end included). The
CPU is the whole run's either way, so oha's count charges the cut streams' work to the streams
that ended; how many of the third wave end in time moves it by up to a tenth between runs.
usage: python3 benches/held_streams_oha_table.py --row ROWS.jsonl TARGET LABEL ROUND OHA.json \
           C0 C1 U0 U1 HZ PEAK_KIB SENT C
       python3 benches/held_streams_oha_table.py --summary ROWS.jsonl C"""

import json
import sys

from held_streams_table import fmt, median, round_ratios

EVENTS_PER_STREAM = 51  # 50 chunks and [DONE]


def per_100k(seconds, events):
    return seconds / events * 1e5 if events else None


def row(args):
    rows, target, label, rnd, path, c0, c1, u0, u1, hz, peak, sent, c = args
    try:
        o = json.load(open(path))
    except (OSError, ValueError):
        o = {}
    codes = o.get("statusCodeDistribution", {})
    ok = int(codes.get("200", 0))
    other = {k: v for k, v in codes.items() if k != "200"} or "-"
    hz = int(hz)
    cpu, user = (int(c1) - int(c0)) / hz, (int(u1) - int(u0)) / hz
    try:
        sent = int(sent)
    except ValueError:
        sent = 0
    lp = o.get("latencyPercentiles") or {}
    r = {"target": target, "round": int(rnd), "c": int(c), "completed": ok, "other": other,
         "cpu": per_100k(cpu, ok * EVENTS_PER_STREAM),
         "user": per_100k(user, ok * EVENTS_PER_STREAM),
         "relayed": per_100k(cpu, sent), "rss": int(peak) / 1024,
         "p50": lp.get("p50"), "p99": lp.get("p99")}
    with open(rows, "a") as f:
        f.write(json.dumps(r) + "\n")
    print(line(label, r))


def line(label, r):
    return (f"| {label} | {fmt(r['completed'], 0)} | {r.get('other', '-')} "
            f"| {fmt(r['cpu'])} ({fmt(r['user'])}) | {fmt(r['relayed'])} "
            f"| {fmt(r['rss'], 0)} | {fmt(r['p50'])} / {fmt(r['p99'])} |")


def summary(rows, c):
    rs = [json.loads(x) for x in open(rows) if x.strip()]
    rs = [r for r in rs if r["c"] == int(c)]
    print()
    for t in dict.fromkeys(r["target"] for r in rs):
        mine = [r for r in rs if r["target"] == t]
        m = {k: median([r[k] for r in mine])
             for k in ("completed", "cpu", "user", "relayed", "rss", "p50", "p99")}
        print(line(f"{t}, median of {len(mine)}", m))
    for key, what in (("cpu", "per event of the streams that ended (oha's count)"),
                      ("relayed", "per event relayed (the upstream's count)")):
        ratios = round_ratios(rs, key)
        if ratios:
            each = ", ".join(f"{x:.2f}x" for x in ratios)
            print(f"\nRingside's CPU {what} against HAProxy's, by round: {each}; "
                  f"median {median(ratios):.2f}x")


if __name__ == "__main__":
    if sys.argv[1] == "--row" and len(sys.argv) == 15:
        row(sys.argv[2:])
    elif sys.argv[1] == "--summary" and len(sys.argv) == 4:
        summary(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
