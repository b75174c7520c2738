#!/usr/bin/python3
"""Plots bench/two_hosts.sh's results: softverbs over RoCE v2 against the link.

Usage: plot_two_hosts.py RESULTS_TSV OUT_PNG

RESULTS_TSV has a header and rows: name, value, unit, reference, reference_value.
Three panels: bandwidth (Gb/s) beside iperf3's one TCP stream, latency (us)
beside sockperf's UDP half round trip, and message rate (M msg/s) beside
issue 12's 1 M msg/s target.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    panels = [("Gb/s", "bandwidth, 64 KiB"), ("us", "latency, 8 B (typical)"),
              ("M msg/s", "message rate, 8 B")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, (unit, title) in zip(axes, panels):
        mine = [r for r in rows if r["unit"] == unit]
        names = [r["name"] for r in mine]
        values = [float(r["value"] or 0) for r in mine]
        ax.bar(names, values, color="#3b6ea5", label="softverbs RoCE v2")
        refs = {(r["reference"], float(r["reference_value"])) for r in mine
                if r["reference_value"]}
        for label, value in refs:
            ax.axhline(value, color="#c0392b", linestyle="--", label=label)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(fontsize=8)
    fig.suptitle("softverbs between two network namespaces (veth) vs the link")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
