"""Parsing perftest (ib_*_lat / ib_*_bw) output and ibv_devinfo's GID table.

Parsers take the captured text of one process and return a dict of numbers,
or raise ParseError with a short reason. They never guess: a value that is
not printed by the tool is not in the dict.
"""

import re


class ParseError(Exception):
    """The output holds no result we can trust; str() is the reason."""


# Column names as perftest 4.5 prints them in its result headers, in the
# order the values follow (see RESULT_FMT_LAT / RESULT_FMT in
# perftest_parameters.h; `strings /usr/bin/ib_write_bw` shows them too).
_LAT_COLUMNS = [
    ("t_min[usec]", "t_min_us"),
    ("t_max[usec]", "t_max_us"),
    ("t_typical[usec]", "t_typical_us"),
    ("t_avg[usec]", "t_avg_us"),
    ("t_stdev[usec]", "t_stdev_us"),
    ("99% percentile[usec]", "p99_us"),
    ("99.9% percentile[usec]", "p999_us"),
]
_BW_COLUMNS = [
    ("BW peak[", "bw_peak"),
    ("BW average[", "bw_avg"),
    ("MsgRate[Mpps]", "msg_rate_mpps"),
]

_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")

# perftest reports MB/sec as MiB/s (it divides by 0x100000). With
# --report_gbits it prints Gb/sec (10^9 bit); converted so every bandwidth
# in the report is MiB/s, the unit ucx_perftest uses too.
_GBIT_TO_MIB = 1e9 / 8 / (1 << 20)


def _numbers(line):
    """The leading run of numeric tokens of a line (None if the first isn't)."""
    out = []
    for tok in line.split():
        if not _NUMBER.match(tok):
            break
        out.append(float(tok))
    return out


def _header_columns(header, known):
    """Which of the known columns the header has, in printed order."""
    found = [(header.find(label), key) for label, key in known if label in header]
    return [key for _, key in sorted(found)]


def _last_table(text):
    """(lines, index of the last result header); ParseError without one."""
    lines = text.splitlines()
    header_at = None
    for i, line in enumerate(lines):
        if "#bytes" in line and "#iterations" in line:
            header_at = i
    if header_at is None:
        raise ParseError(_failure_reason(text) or "no result table in output")
    return lines, header_at


def parse_result(text):
    """Parse one perftest process's output into its result row.

    Returns {"kind": "lat"|"bw", "bytes": int, "iterations": int, ...} with
    t_*_us keys for latency tests, bw_avg_mib_s/bw_peak_mib_s/msg_rate_mpps
    for bandwidth tests. Takes the first data row after the last result
    header (we run one size per invocation).
    """
    lines, header_at = _last_table(text)

    header = lines[header_at]
    if "t_typical" in header or "t_min" in header or "t_avg" in header:
        kind, columns = "lat", _header_columns(header, _LAT_COLUMNS)
    elif "BW average" in header:
        kind, columns = "bw", _header_columns(header, _BW_COLUMNS)
    else:
        raise ParseError("unknown perftest result header: " + header.strip()[:60])

    for line in lines[header_at + 1:]:
        if line.strip().startswith("---"):
            break  # perftest closes its table with a line of dashes
        values = _numbers(line)
        if len(values) < 2 + len(columns):
            # Blank, or a diagnostic printed where the row should be
            # (e.g. "Couldn't post recv"): keep looking until the table ends.
            continue
        row = {"kind": kind, "bytes": int(values[0]), "iterations": int(values[1])}
        for key, value in zip(columns, values[2:]):
            row[key] = value
        if kind == "bw":
            factor = _GBIT_TO_MIB if "Gb/sec" in header else 1.0
            for key in ("bw_peak", "bw_avg"):
                if key in row:
                    row[key + "_mib_s"] = row.pop(key) * factor
        return row
    raise ParseError(_failure_reason(text) or "result header printed but no result row")


def parse_intervals(text, skip=1):
    """Parse a `--run_infinitely` bandwidth run (a row each interval, until
    the process is stopped) into one row: the median of the interval rows
    after the first `skip` (the start: rings and pages touched the first
    time). Returns {"kind": "bw", "bytes", "iterations" (of the median
    row), "msg_rate_mpps", "bw_avg_mib_s", "intervals" (rows used)}.
    """
    lines, header_at = _last_table(text)
    header = lines[header_at]
    if "BW average" not in header:
        raise ParseError("not a bandwidth table: " + header.strip()[:60])
    columns = _header_columns(header, _BW_COLUMNS)
    factor = _GBIT_TO_MIB if "Gb/sec" in header else 1.0
    rows = []
    for line in lines[header_at + 1:]:
        values = _numbers(line)
        if len(values) < 2 + len(columns):
            continue
        row = {"bytes": int(values[0]), "iterations": int(values[1])}
        row.update(zip(columns, values[2:]))
        rows.append(row)
    used = rows[skip:]
    if not used or any("msg_rate_mpps" not in r for r in used):
        raise ParseError(_failure_reason(text) or "{} interval rows, {} needed".format(
            len(rows), skip + 1))
    used.sort(key=lambda r: r["msg_rate_mpps"])
    median = used[(len(used) - 1) // 2]  # the lower of the middle two
    return {"kind": "bw", "bytes": median["bytes"], "iterations": median["iterations"],
            "msg_rate_mpps": median["msg_rate_mpps"],
            "bw_avg_mib_s": median.get("bw_avg", 0.0) * factor, "intervals": len(used)}


# Lines that say why a run failed, in the words perftest, libibverbs, UCX and
# our launcher use. The first match is the most specific reason in practice
# (later lines are usually consequences such as "Failed to ... " cascades).
_FAILURE = re.compile(
    r"(couldn'?t|could not|cannot|can'?t|failed|failure|error|unable|"
    r"not supported|unsupported|invalid|refused|timed? ?out|abort|"
    r"segmentation|killed|no such)",
    re.IGNORECASE)


def _failure_reason(text):
    for line in text.splitlines():
        if _FAILURE.search(line):
            return " ".join(line.split())
    return None


def failure_reason(text):
    """The first line of output that explains a failure, or None."""
    return _failure_reason(text)


_GID_LINE = re.compile(r"^\s*GID\[\s*(\d+)\]:\s*(\S+),\s*(RoCE v[12]|IB)?\s*$")


def roce_v2_gid_index(devinfo_text):
    """Index of the first "RoCE v2" GID in `ibv_devinfo -v` output, or None."""
    for line in devinfo_text.splitlines():
        m = _GID_LINE.match(line)
        if m and m.group(3) == "RoCE v2":
            return int(m.group(1))
    return None
