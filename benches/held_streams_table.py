"""The held-streams table (benches/held_streams.sh): its header, one row per target and round,
and with ROUNDS > 1 a summary: per target, the median of each figure over its rounds (each
column on its own, so a row need not be one round's); then Ringside's CPU per event against
HAProxy's defaults round by round (the two ran about a minute apart), their median, and the
ratio of the medians.
usage: python3 benches/held_streams_table.py --header
       python3 benches/held_streams_table.py --row ROWS.jsonl LABEL   (prints the file's last row)
       python3 benches/held_streams_table.py ROWS.jsonl               (the summary)"""

import json
import statistics
import sys

HEADER = ("| target | streams completed | errors | events/s | CPU s per 100k events (user) "
          "| machine CPU s per 100k events | peak RSS MiB | RSS per held stream KiB "
          "| p50 stream ms | p99 stream ms | event delay p50 / p99 ms |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

FIGURES = ("completed", "errors", "events_per_s", "cpu", "cpu_user", "machine", "rss",
           "per_stream", "p50", "p99", "delay_p50", "delay_p99")


def median(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def table_row(label, m):
    """One row of the table from a row's (or the medians') figures."""
    return (f"| {label} | {fmt(m['completed'], 0)} | {fmt(m['errors'], 0)} "
            f"| {fmt(m['events_per_s'], 0)} | {fmt(m['cpu'])} ({fmt(m.get('cpu_user'))}) "
            f"| {fmt(m['machine'])} "
            f"| {fmt(m['rss'], 0)} | {fmt(m['per_stream'], 1)} | {fmt(m['p50'], 0)} "
            f"| {fmt(m['p99'], 0)} | {fmt(m['delay_p50'], 0)} / {fmt(m['delay_p99'], 0)} |")


def round_ratios(rows, key):
    """Ringside's figure `key` over HAProxy's, in each round both have it, in round order."""
    by_round = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["target"]] = r
    ratios = []
    for n in sorted(by_round):
        pair = by_round[n]
        if pair.get("ringside", {}).get(key) and pair.get("haproxy", {}).get(key):
            ratios.append(pair["ringside"][key] / pair["haproxy"][key])
    return ratios


def summary(rows):
    targets = list(dict.fromkeys(r["target"] for r in rows))
    print()
    print(f"Median over {max(r['round'] for r in rows)} rounds:")
    print()
    print(HEADER)
    medians = {}
    for t in targets:
        mine = [r for r in rows if r["target"] == t]
        medians[t] = {k: median([r.get(k) for r in mine]) for k in FIGURES}
        print(table_row(t, medians[t]))
    ratios = round_ratios(rows, "cpu")
    if ratios:
        print()
        print("Ringside / HAProxy CPU per event, round by round: "
              + ", ".join(f"{x:.2f}x" for x in ratios)
              + f"; median {statistics.median(ratios):.2f}x; ratio of the medians "
              + f"{medians['ringside']['cpu'] / medians['haproxy']['cpu']:.2f}x")


def main(args):
    if args[0] == "--header":
        print(HEADER)
        return
    if args[0] == "--row":
        with open(args[1]) as f:
            last = [line for line in f if line.strip()][-1]
        print(table_row(args[2], json.loads(last)))
        return
    with open(args[0]) as f:
        summary([json.loads(line) for line in f if line.strip()])


if __name__ == "__main__":
    main(sys.argv[1:])
