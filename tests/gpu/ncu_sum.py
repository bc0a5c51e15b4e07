#!/usr/bin/env python3
"""ncu_sum.py — sums `ncu --csv --metrics gpu__time_duration.sum` output by kernel name.

    ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum CMD > k.csv
    python3 tests/gpu/ncu_sum.py k.csv          # table: total us, launches, share, name
"""
import csv
import sys
from collections import defaultdict


def main(path):
    rows = open(path, encoding="utf-8", errors="replace").read().splitlines()
    start = next((i for i, r in enumerate(rows) if r.startswith('"ID"')), None)
    if start is None:
        sys.exit("ncu_sum: no CSV header in " + path)
    tot, cnt = defaultdict(float), defaultdict(int)
    for r in csv.DictReader(rows[start:]):
        if r.get("Metric Unit") != "ns":
            sys.exit("ncu_sum: expected nanoseconds (--print-units base), got " + repr(r.get("Metric Unit")))
        us = float(r["Metric Value"].replace(",", "")) / 1000.0
        name = r["Kernel Name"].split("(")[0]
        tot[name] += us
        cnt[name] += 1
    all_us = sum(tot.values()) or 1.0
    print(f"{'total_us':>10} {'n':>6} {'share':>6}  kernel")
    for name, us in sorted(tot.items(), key=lambda kv: -kv[1]):
        print(f"{us:10.1f} {cnt[name]:6d} {100 * us / all_us:5.1f}%  {name}")
    print(f"{all_us:10.1f} {sum(cnt.values()):6d} 100.0%  (all)")


if __name__ == "__main__":
    main(sys.argv[1])
