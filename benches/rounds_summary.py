"""The summary of a held-streams run with ROUNDS > 1 (benches/held_streams.sh): per target, the
median of each figure over its rounds; then Ringside's CPU per event against HAProxy's defaults
round by round (the two ran about a minute apart), their median, and the ratio of the medians.
usage: python3 benches/rounds_summary.py ROWS.jsonl (one JSON object per target and round)"""

import json
import statistics
import sys


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    targets = list(dict.fromkeys(r["target"] for r in rows))
    rounds = max(r["round"] for r in rows)
    print()
    print(f"Median over {rounds} rounds:")
    print()
    print("| target | streams completed | CPU s per 100k events | machine CPU s per 100k events "
          "| peak RSS MiB | p99 stream ms | event delay p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for t in targets:
        mine = [r for r in rows if r["target"] == t]
        col = lambda k: median([r[k] for r in mine])  # noqa: E731
        print(f"| {t} | {fmt(col('completed'), 0)} | {fmt(col('cpu'))} | {fmt(col('machine'))} "
              f"| {fmt(col('rss'), 0)} | {fmt(col('p99'), 0)} | {fmt(col('delay_p99'), 0)} |")
    by_round = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["target"]] = r
    ratios = []
    for n in sorted(by_round):
        pair = by_round[n]
        if pair.get("ringside", {}).get("cpu") and pair.get("haproxy", {}).get("cpu"):
            ratios.append(pair["ringside"]["cpu"] / pair["haproxy"]["cpu"])
    if ratios:
        cpu = lambda t: median([r["cpu"] for r in rows if r["target"] == t])  # noqa: E731
        print()
        print("Ringside / HAProxy CPU per event, round by round: "
              + ", ".join(f"{x:.2f}x" for x in ratios)
              + f"; median {statistics.median(ratios):.2f}x; "
              + f"ratio of the medians {cpu('ringside') / cpu('haproxy'):.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])
