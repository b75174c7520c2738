"""Issue 16's workloads: memory registration, MPI large messages, many QPs.

Parsers for bench/reg_mr_cost and bench/mpi_large_pingpong, and the memory
sampler of the many-QP runs. run.py runs them; report.py reports them.
"""

import os

REG_SIZES = [4096, 65536, 1 << 20, 4 << 20, 64 << 20]
MPI_SIZES = [1 << 20, 4 << 20]
QP_COUNTS = [1, 16, 256, 1000]
# perftest's default tx depth (128) times 1000 QPs exceeds the max_cqe of
# many NICs (65535, softverbs0's until it became 2^20 - 1), so the many-QP
# runs all use 64 (and stay comparable with earlier reports).
QP_TX_DEPTH = 64


class ParseError(Exception):
    pass


def parse_reg_mr(text):
    """reg_mr_cost's lines -> {size: {measure: median_us}} ("first_touch" too)."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 5:
            continue
        name = fields[0]
        try:
            size = int(fields[1])
            median, low, high = (float(f) for f in fields[2:])
        except ValueError:
            continue
        out.setdefault(size, {})[name] = median
        out[size][name + "_min"] = low
        out[size][name + "_max"] = high
    if not out:
        raise ParseError("reg_mr_cost printed no measurement")
    return out


def parse_mpi(text):
    """mpi_large_pingpong's lines -> {size: {"iterations", "rtt_us", "bw_mib_s"}}."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[0] == "pingpong":
            try:
                out[int(fields[1])] = {"iterations": int(fields[2]), "rtt_us": float(fields[3]),
                                       "bw_mib_s": float(fields[4])}
            except ValueError:
                continue
    if not out:
        raise ParseError("mpi_large_pingpong printed no result")
    return out


def pss_kib(pid):
    """Proportional set size of a process in KiB (shared pages split among
    their users, so the rings a client shares with the daemon count once)."""
    try:
        with open("/proc/{}/smaps_rollup".format(pid)) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def pids_with_arg(needle):
    """Our processes whose command line has `needle` as one argument."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{}/cmdline".format(entry), "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if needle.encode() in args:
            found.append(int(entry))
    return found


def daemon_pid(runtime_dir):
    """The softverbsd that holds runtime_dir's lock file, or None."""
    lock = os.path.join(runtime_dir, "softverbsd.lock")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fd_dir = "/proc/{}/fd".format(entry)
        try:
            for fd in os.listdir(fd_dir):
                if os.readlink(os.path.join(fd_dir, fd)) == lock:
                    return int(entry)
        except OSError:
            continue
    return None
