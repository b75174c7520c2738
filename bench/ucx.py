"""Parsing ucx_perftest (UCX 1.13) client output.

ucx_perftest prints a table whose rows are
    <stage> <iterations> <p50 lat> <avg lat> <overall lat>
            <avg bw> <overall bw> <avg msg rate> <overall msg rate>
Progress rows ("[thread 0] ...") come once a second; the last row starts
with "Final:" (or has no stage label with -f). In each row "average" is the
last report interval only and "overall" is the whole run, so the whole-run
numbers are the "overall" columns. Units, from the table header: latency
(or "overhead" for bw tests) in usec, bandwidth in MB/s where MB = 2^20
bytes (msg/s x size / 2^20 matches it), message rate in msg/s.
With -v it prints CSV instead (iterations,50.0_percentile_lat,avg_lat,...).
"""

import re

from perftest import ParseError, failure_reason

_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_KEYS = ["iterations", "p50_us", "avg_us", "overall_us",
         "avg_bw_mib_s", "overall_bw_mib_s", "avg_msg_per_s", "overall_msg_per_s"]


def _row(tokens):
    if len(tokens) < 8 or not all(_NUMBER.match(t) for t in tokens[-8:]):
        return None
    return dict(zip(_KEYS, (float(t) for t in tokens[-8:])))


def parse_result(text):
    """The whole-run result of one ucx_perftest client run.

    Returns {"iterations", "p50_us", "lat_us" (overall), "bw_mib_s" (overall),
    "msg_rate_mpps" (overall)}; raises ParseError if there is no final row.
    """
    final = None
    csv_header = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("iterations,"):
            csv_header = stripped.split(",")
            continue
        if csv_header and "," in stripped:
            fields = stripped.split(",")
            if len(fields) == len(csv_header) and all(_NUMBER.match(f) for f in fields):
                named = dict(zip(csv_header, fields))
                final = {
                    "iterations": float(named["iterations"]),
                    "p50_us": _first(named, "percentile_lat"),
                    "overall_us": float(named["overall_lat"]),
                    "overall_bw_mib_s": float(named["overall_bw"]),
                    "overall_msg_per_s": float(named["overall_mr"]),
                }
            continue
        if stripped.startswith("Final:"):
            final = _row(stripped[len("Final:"):].split())
        elif final is None and stripped and stripped[0].isdigit():
            # -f prints only the final row, with no stage label.
            final = _row(stripped.split()) or final
    if final is None:
        raise ParseError(failure_reason(text) or "no final result row in ucx_perftest output")
    return {
        "iterations": int(final["iterations"]),
        "p50_us": final.get("p50_us"),
        "lat_us": final["overall_us"],
        "bw_mib_s": final["overall_bw_mib_s"],
        "msg_rate_mpps": final["overall_msg_per_s"] / 1e6,
    }


def _first(named, suffix):
    for key, value in named.items():
        if key.endswith(suffix):
            return float(value)
    return None
