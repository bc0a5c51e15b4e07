#!/usr/bin/env python3
"""ncu_sum.py — sums `ncu --csv --metrics gpu__time_duration.sum` output by kernel name.

    ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum CMD > k.csv
    python3 tests/gpu/ncu_sum.py k.csv                    # table: total us, launches, share, name
    python3 tests/gpu/ncu_sum.py k.csv --from k_narrow_f16   # only the launches from the last one
                                                             # named k_narrow_f16* on (suite L f16:
                                                             # a training step starts with the
                                                             # stem's forward)
    python3 tests/gpu/ncu_sum.py k.csv --from k_narrow_f16 --list   # those launches in order
"""
import csv
import sys
from collections import defaultdict


def launches(path):
    """[(kernel name, us)] in launch order."""
    rows = open(path, encoding="utf-8", errors="replace").read().splitlines()
    start = next((i for i, r in enumerate(rows) if r.startswith('"ID"')), None)
    if start is None:
        sys.exit("ncu_sum: no CSV header in " + path)
    out = []
    for r in csv.DictReader(rows[start:]):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        if r.get("Metric Unit") != "ns":
            sys.exit("ncu_sum: expected nanoseconds (--print-units base), got " + repr(r.get("Metric Unit")))
        out.append((r["Kernel Name"].split("(")[0], float(r["Metric Value"].replace(",", "")) / 1000.0))
    return out


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: ncu_sum.py FILE.csv [--from PREFIX] [--list]")
    seq = launches(argv[0])
    args = argv[1:]
    if "--from" in args:
        prefix = args[args.index("--from") + 1] if args.index("--from") + 1 < len(args) else ""
        first = [i for i, (name, _) in enumerate(seq) if prefix and name.startswith(prefix)]
        if not first:
            sys.exit("ncu_sum: no launch named " + repr(prefix) + "*")
        seq = seq[first[-1]:]
    if "--list" in args:
        for i, (name, us) in enumerate(seq):
            print(f"{i:5d} {us:10.1f}  {name}")
        print(f"{sum(us for _, us in seq):10.1f} us in {len(seq)} launches")
        return
    tot, cnt = defaultdict(float), defaultdict(int)
    for name, us in seq:
        tot[name] += us
        cnt[name] += 1
    all_us = sum(tot.values()) or 1.0
    print(f"{'total_us':>10} {'n':>6} {'share':>6}  kernel")
    for name, us in sorted(tot.items(), key=lambda kv: -kv[1]):
        print(f"{us:10.1f} {cnt[name]:6d} {100 * us / all_us:5.1f}%  {name}")
    print(f"{all_us:10.1f} {sum(cnt.values()):6d} 100.0%  (all)")


if __name__ == "__main__":
    main(sys.argv[1:])
