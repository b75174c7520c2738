#!/usr/bin/python3
"""Benchmark softverbs with perftest against UCX's shared-memory baseline.

Runs each perftest program as a server/client pair on 127.0.0.1 under
`softverbs run`, ucx_perftest (UCX_TLS=posix) the same way, and ucx_perftest
on softverbs0 itself (rc_verbs, through the kernel view), parses what
they print, and writes bench/results/latest.md (+ a timestamped copy) and
bench/results/latest.png. See docs/benchmarks.md.

Run with Debian's /usr/bin/python3 (it has python3-matplotlib).
Exit status: 0 all runs measured, 1 some run failed (the report is still
written, with "failed: <reason>" rows), 2 bad arguments or setup.
"""

import argparse
import atexit
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import perftest  # noqa: E402
import report  # noqa: E402
import threading  # noqa: E402
import ucx  # noqa: E402
import workloads  # noqa: E402

REPO = os.path.dirname(HERE)
DEVICE = "softverbs0"

# (name, tool, kind, sizes). Atomics are always 8 bytes: perftest takes no
# -s for them. The 8-byte ib_write_bw run is also the message-rate run.
PLAN = [
    ("ucp_put_lat", "ucx", "lat", [8, 64]),
    # UCX's two-sided message over shared memory: what a SEND is, next to
    # the one-sided put (an info ratio of issue 16, bench/report.py).
    ("ucp_am_lat", "ucx", "lat", [8]),
    ("ucp_put_bw", "ucx", "bw", [8, 65536]),
    ("ib_send_lat", "softverbs", "lat", [8, 64]),
    ("ib_write_lat", "softverbs", "lat", [8, 64]),
    ("ib_read_lat", "softverbs", "lat", [8, 64]),
    ("ib_atomic_lat", "softverbs", "lat", [8]),
    ("ib_send_bw", "softverbs", "bw", [8, 65536]),
    ("ib_write_bw", "softverbs", "bw", [8, 65536]),
    # The same 8-byte writes in perftest's --run_infinitely loop, which has
    # none of its per-post bookkeeping (a timestamp and the addresses'
    # modulo arithmetic each post): the rate the device itself allows
    # (docs/datapath.md, "The plain post path"). A row a second; stopped
    # after ITERS_16's "infinite_seconds", the median row after the first.
    ("ib_write_bw_infinite", "softverbs", "bw", [8]),
    ("ib_read_bw", "softverbs", "bw", [8, 65536]),
    ("ib_atomic_bw", "softverbs", "bw", [8]),
    ("uct_rc_put_lat", "ucx-softverbs", "lat", [8]),
    ("uct_rc_put_bw", "ucx-softverbs", "bw", [65536]),
    ("ucp_tag_lat", "ucx-softverbs", "lat", [8]),
    # Issue 16. reg_mr: bench/reg_mr_cost, one process, every size in one run.
    ("reg_mr", "reg_mr", "reg", workloads.REG_SIZES),
    # Two-rank Open MPI ping-pong (bench/mpi_large_pingpong): over UCX on
    # softverbs0 with UCX's default rendezvous, and on shared memory (btl vader).
    ("mpi_pingpong", "mpi-softverbs", "bw", workloads.MPI_SIZES),
    ("mpi_pingpong_vader", "mpi-shm", "bw", workloads.MPI_SIZES),
    # ib_write_bw -s 8 with -q N QPs ("size" is N): aggregate rate, memory.
    ("ib_write_bw_qps", "softverbs-qps", "bw", workloads.QP_COUNTS),
]

# The tools whose latency rows and 8-byte message-rate rows run in --rounds
# rounds (the median run is reported): the ones issue 4's and issue 16's
# ratios and rate targets compare.
ROUND_TOOLS = ("softverbs", "ucx")


def in_rounds(tool, kind, size):
    return tool in ROUND_TOOLS and (kind == "lat" or size == 8)

# The tools that run once for all their sizes.
GROUP_TOOLS = ("reg_mr", "mpi-softverbs", "mpi-shm")
# Of them, the two whose ratio is a target: run in the same rounds (the
# median run shown, the ratio paired by round), as this VM's memory
# bandwidth has modes too (vader's 4 MiB ping-pong 3.1 against 11.4 GiB/s,
# softverbs' 2.5 against 25 GiB/s, in runs a minute apart).
ROUND_GROUP_TOOLS = ("mpi-softverbs", "mpi-shm")

# UCX on softverbs0 (tool "ucx-softverbs"): ucx_perftest under `softverbs
# run`, which shows it softverbs0 (docs/kernel_view.md). UCT rows name the
# transport and device; the UCP row lets UCX choose among these transports.
UCX_ON_SOFTVERBS = {
    "uct_rc_put_lat": (["-t", "put_lat", "-d", DEVICE + ":1", "-x", "rc_verbs"], {}),
    "uct_rc_put_bw": (["-t", "put_bw", "-D", "zcopy", "-d", DEVICE + ":1", "-x", "rc_verbs"], {}),
    "ucp_tag_lat": (["-t", "tag_lat"], {"UCX_TLS": "rc_verbs,ud_verbs,self",
                                        "UCX_NET_DEVICES": DEVICE + ":1"}),
}

# Iterations per run: (latency, bw 8 B, bw 64 KiB). UCX gets more because it
# is fast enough that perftest-sized counts would finish in microseconds. The
# 8-byte bandwidth runs, the message rates compared with UCX's, count as many
# messages as UCX's: 200,000 lasted 30-70 ms, where the first touch of the
# rings and one preemption of the client weigh; 2,000,000 (65 ms for
# ib_write_bw, 25 ms for UCX's put) still measured the start more than the
# steady state on these VMs after a few seconds idle - four alternating
# pairs of runs, session 32: ib_write_bw -s 8 19.1-29.2 M/s with 2,000,000,
# 28.2-31.8 with 20,000,000; UCX's 8-byte put 30-60 against 57-90 M/s.
ITERS = {
    "full": {"softverbs": (1000000, 20000000, 20000), "ucx": (1000000, 20000000, 50000),
             "ucx-softverbs": (100000, 200000, 20000)},
    "quick": {"softverbs": (2000, 5000, 1000), "ucx": (20000, 100000, 2000),
              "ucx-softverbs": (2000, 5000, 1000)},
}
# Issue 16's rows: reg_mr_cost repetitions, MPI ping-pong round trips per
# size, and the many-QP runs' duration (perftest -D: the steady state; with
# -n, a count spread over 1000 QPs is mostly ramp-up and tail).
ITERS_16 = {
    "full": {"reg_reps": 11, "mpi": 200, "qp_seconds": 5, "infinite_seconds": 6},
    "quick": {"reg_reps": 3, "mpi": 20, "qp_seconds": 2, "infinite_seconds": 5},
}

# Every process we start, so that nothing outlives us (atexit + signals).
_PROCS = []


def _kill(proc):
    if proc.poll() is None:
        try:
            # Each pair member runs in its own session: `softverbs run`
            # and its child die together.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _kill_all():
    for proc in _PROCS:
        _kill(proc)


def _on_signal(signum, _frame):
    _kill_all()
    sys.exit(128 + signum)


def _spawn(cmd, env, log_path):
    log = open(log_path, "w")
    # Output to a file, not a pipe: a pipe nobody reads while we wait on the
    # partner process could fill and stall the benchmark.
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    _PROCS.append(proc)
    return proc


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def free_port():
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_listening(port):
    # Read the kernel's socket table rather than connecting: perftest and
    # ucx_perftest servers accept exactly one connection, so a probe
    # connection would be taken as the client.
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return False


def pinned(server_cmd, client_cmd):
    """The pair pinned as benchmarks pin them: the server to the first CPU
    this process may use, the client - the side that posts, whose rate is
    measured - to the last, for every tool alike. On the 2-vCPU VMs here
    CPU 0 takes the interrupts: UCX's 8-byte put rate was 31-50 M/s with its
    client there and 67-88 M/s on CPU 1, and unpinned runs landed on either.
    Unpinned with one CPU or without taskset."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return server_cmd, client_cmd
    return (["taskset", "-c", str(cpus[0])] + server_cmd,
            ["taskset", "-c", str(cpus[-1])] + client_cmd)


def probe_line(args):
    """bench/line_probe between the two CPUs pinned() uses: how long a cache
    line takes to go from one to the other now (ns), or None where it cannot
    tell (one CPU, no taskset, not built, failed)."""
    cpus = sorted(os.sched_getaffinity(0))
    program = os.path.join(os.path.dirname(args.softverbs), "line_probe")
    if len(cpus) < 2 or not os.access(program, os.X_OK):
        return None
    try:
        out = subprocess.run([program, str(cpus[0]), str(cpus[-1])], capture_output=True,
                             text=True, timeout=10).stdout
        return report.parse_line_probe(out)
    except (OSError, subprocess.TimeoutExpired):
        return None


def run_pair(server_cmd, client_cmd, env, port, timeout, log_base, client_ok=(0,),
             server_grace=10):
    """Run a server, wait until it listens, run the client against it (the
    two pinned: pinned()). client_ok: the client's exit statuses that are
    no error; server_grace: how long the server may take to end after it.

    Returns (client_output, server_output, error or None). Both processes
    are gone when it returns.
    """
    server_cmd, client_cmd = pinned(server_cmd, client_cmd)
    deadline = time.monotonic() + timeout
    server_log, client_log = log_base + ".server.txt", log_base + ".client.txt"
    server = _spawn(server_cmd, env, server_log)
    client = None
    error = None
    try:
        while not is_listening(port):
            if server.poll() is not None:
                out = _read(server_log)
                why = perftest.failure_reason(out) or "no error message"
                return "", out, "server exited {} before listening: {}".format(server.returncode, why)
            if time.monotonic() > deadline:
                return "", _read(server_log), "timed out after {} s waiting for the server".format(timeout)
            time.sleep(0.05)
        client = _spawn(client_cmd, env, client_log)
        try:
            client.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            error = "timed out after {} s".format(timeout)
        if error is None:
            try:
                # The server finishes right after the client; give it a
                # moment so its output is complete, then stop it regardless.
                server.wait(timeout=server_grace)
            except subprocess.TimeoutExpired:
                pass
            if client.returncode not in client_ok:
                out = _read(client_log) + "\n" + _read(server_log)
                error = "exit {}: {}".format(client.returncode,
                                             perftest.failure_reason(out) or "no error message")
    finally:
        _kill(server)
        if client is not None:
            _kill(client)
    client_out, server_out = _read(client_log), _read(server_log)
    if error and error.startswith("timed out"):
        why = perftest.failure_reason(client_out + "\n" + server_out)
        if why:
            error += " (" + why + ")"
    return client_out, server_out, error


# Rows whose perftest program is not their name.
PERFTEST_PROGRAM = {"ib_write_bw_infinite": "ib_write_bw"}


def perftest_cmds(args, name, size, iters, port, gid_index):
    common = ["-d", DEVICE, "-x", str(gid_index), "-F", "-p", str(port)]
    if "atomic" not in name:
        common += ["-s", str(size)]
    client_stop = []
    if name.endswith("_infinite"):
        # Runs until stopped: the client gets SIGINT (coreutils' timeout,
        # exit 124) after its seconds; perftest flushes each row.
        common += ["--run_infinitely", "-D", "1"]
        client_stop = ["timeout", "-s", "INT", str(ITERS_16[args.mode]["infinite_seconds"])]
    else:
        common += ["-n", str(iters)]
    wrap = [args.softverbs, "run", "--", PERFTEST_PROGRAM.get(name, name)]
    return wrap + common, client_stop + wrap + common + ["127.0.0.1"]


def ucx_cmds(name, size, iters, port):
    common = ["-t", name, "-s", str(size), "-n", str(iters), "-p", str(port)]
    return ["ucx_perftest"] + common, ["ucx_perftest", "127.0.0.1"] + common


def ucx_softverbs_cmds(args, name, size, iters, port):
    extra, env = UCX_ON_SOFTVERBS[name]
    common = extra + ["-s", str(size), "-n", str(iters), "-p", str(port)]
    wrap = [args.softverbs, "run", "--", "ucx_perftest"]
    return wrap + common, wrap + ["127.0.0.1"] + common, env


def iterations(mode, tool, kind, size):
    lat, bw_small, bw_large = ITERS[mode][tool]
    if kind == "lat":
        return lat
    return bw_small if size <= 4096 else bw_large


def measure(args, name, tool, kind, size, gid, env, log_dir):
    """One benchmark: returns a report result dict, never raises."""
    result = {"name": name, "tool": tool, "kind": kind, "size": size, "row": None, "error": None}
    program = "ucx_perftest" if tool.startswith("ucx") else PERFTEST_PROGRAM.get(name, name)
    if shutil.which(program) is None:
        result["error"] = program + " not installed"
        return result
    if tool == "softverbs" and gid[0] is None:  # perftest needs -x; UCX finds its GID
        result["error"] = gid[1]
        return result
    n = iterations(args.mode, tool, kind, size)
    port = free_port()
    if tool == "ucx":
        server, client = ucx_cmds(name, size, n, port)
        run_env = dict(env, UCX_TLS="posix")
    elif tool == "ucx-softverbs":
        server, client, extra_env = ucx_softverbs_cmds(args, name, size, n, port)
        run_env = dict(env, **extra_env)
    else:
        server, client = perftest_cmds(args, name, size, n, port, gid[0])
        run_env = env
    log_base = os.path.join(log_dir, "{}_{}".format(name, size))
    infinite = name.endswith("_infinite")
    span = ("{} s".format(ITERS_16[args.mode]["infinite_seconds"]) if infinite
            else "{} iterations".format(n))
    print("  {} {} B, {} ...".format(name, size, span), end="", flush=True, file=sys.stderr)
    started = time.monotonic()
    probed = in_rounds(tool, kind, size)
    before = probe_line(args) if probed else None
    client_out, _server_out, error = run_pair(
        server, client, run_env, port, args.timeout, log_base,
        client_ok=(124,) if infinite else (0,), server_grace=0 if infinite else 10)
    if probed:
        result["line_ns"] = [before, probe_line(args)]
    if error is None:
        try:
            parse = ucx.parse_result if tool.startswith("ucx") else perftest.parse_result
            if infinite:
                parse = perftest.parse_intervals
            result["row"] = parse(client_out)
        except perftest.ParseError as e:
            error = str(e)
    result["error"] = error
    print(" {} ({:.1f} s)".format("ok" if error is None else "failed: " + error,
                                   time.monotonic() - started), file=sys.stderr)
    return result


def _run_one(cmd, env, timeout, log_path):
    """Runs one command (its own session); returns (output, error or None)."""
    proc = _spawn(cmd, env, log_path)
    error = None
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        error = "timed out after {} s".format(timeout)
    finally:
        _kill(proc)
    out = _read(log_path)
    if error is None and proc.returncode != 0:
        error = "exit {}: {}".format(proc.returncode,
                                     perftest.failure_reason(out) or "no error message")
    return out, error


def _mpirun(args, program, sizes, iters, extra):
    return (["mpirun", "--oversubscribe", "-np", "2"] + extra +
            [program, "-n", str(iters), "-w", str(max(2, iters // 10))] + [str(s) for s in sizes])


def measure_group(args, name, tool, kind, sizes, env, log_dir):
    """Issue 16's one-process rows: a list of results, one per size."""
    results = [{"name": name, "tool": tool, "kind": kind, "size": size, "row": None,
                "error": None} for size in sizes]
    bin_dir = os.path.dirname(args.softverbs)
    it = ITERS_16[args.mode]
    run_env = dict(env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if tool == "reg_mr":
        program = os.path.join(bin_dir, "reg_mr_cost")
        cmd = [program, "-r", str(it["reg_reps"])] + [str(s) for s in sizes]
        parse = workloads.parse_reg_mr
    else:
        program = os.path.join(bin_dir, "mpi_large_pingpong")
        if tool == "mpi-softverbs":
            # UCX's defaults otherwise: rendezvous from its threshold on,
            # which registers the user buffers.
            cmd = [args.softverbs, "run", "--"] + _mpirun(
                args, program, sizes, it["mpi"],
                ["--mca", "pml", "ucx", "--mca", "btl", "^openib,uct",
                 "-x", "UCX_NET_DEVICES={}:1".format(DEVICE),
                 "-x", "UCX_TLS=rc_verbs,ud_verbs,self"])
        else:
            cmd = _mpirun(args, program, sizes, it["mpi"],
                          ["--mca", "pml", "ob1", "--mca", "btl", "vader,self"])
        parse = workloads.parse_mpi
        if shutil.which("mpirun") is None:
            for r in results:
                r["error"] = "mpirun not installed (openmpi-bin)"
            return results
    if not os.access(program, os.X_OK):
        for r in results:
            r["error"] = program + " not built"
        return results
    print("  {} {} ...".format(name, ",".join(str(s) for s in sizes)), end="", flush=True,
          file=sys.stderr)
    started = time.monotonic()
    probed = tool in ROUND_GROUP_TOOLS
    before = probe_line(args) if probed else None
    out, error = _run_one(cmd, run_env, args.timeout, os.path.join(log_dir, name + ".txt"))
    line_ns = [before, probe_line(args)] if probed else None
    parsed = {}
    if error is None:
        try:
            parsed = parse(out)
        except workloads.ParseError as e:
            error = str(e)
    for r in results:
        r["row"] = parsed.get(r["size"])
        if line_ns is not None:
            r["line_ns"] = line_ns
        if tool == "reg_mr" and r["row"] is not None:
            # The yardstick of the 64 MiB target, measured in the same run.
            r["row"]["first_touch_64mib_us"] = parsed.get(64 << 20, {}).get("first_touch")
        r["error"] = error if error or r["row"] is not None else "no result for this size"
    print(" {} ({:.1f} s)".format("ok" if error is None else "failed: " + error,
                                  time.monotonic() - started), file=sys.stderr)
    return results


class _MemorySampler(threading.Thread):
    """Largest Pss seen of the processes of one perftest pair and of the daemon."""

    def __init__(self, port, runtime_dir):
        super().__init__(daemon=True)
        self.port, self.runtime_dir = str(port), runtime_dir
        self.stop = threading.Event()
        self.peak_pair_kib, self.peak_daemon_kib = 0, 0

    def run(self):
        daemon = workloads.daemon_pid(self.runtime_dir)
        while not self.stop.wait(0.25):
            pair = [workloads.pss_kib(p) for p in workloads.pids_with_arg(self.port)]
            total = sum(v for v in pair if v)
            self.peak_pair_kib = max(self.peak_pair_kib, total)
            if daemon is not None:
                self.peak_daemon_kib = max(self.peak_daemon_kib, workloads.pss_kib(daemon) or 0)


def measure_qps(args, name, qps, gid, env, log_dir):
    """ib_write_bw -s 8 over `qps` QPs between two processes."""
    result = {"name": name, "tool": "softverbs-qps", "kind": "bw", "size": qps, "row": None,
              "error": None}
    if shutil.which("ib_write_bw") is None:
        result["error"] = "ib_write_bw not installed"
        return result
    if gid[0] is None:
        result["error"] = gid[1]
        return result
    seconds = ITERS_16[args.mode]["qp_seconds"]
    port = free_port()
    common = ["-d", DEVICE, "-x", str(gid[0]), "-F", "-s", "8", "-D", str(seconds), "-q", str(qps),
              "-t", str(workloads.QP_TX_DEPTH), "-p", str(port)]
    wrap = [args.softverbs, "run", "--", "ib_write_bw"]
    print("  ib_write_bw -q {}, {} s ...".format(qps, seconds), end="", flush=True, file=sys.stderr)
    started = time.monotonic()
    sampler = _MemorySampler(port, env["SOFTVERBS_RUNTIME_DIR"])
    sampler.start()
    try:
        client_out, _server_out, error = run_pair(
            wrap + common, wrap + common + ["127.0.0.1"], env, port,
            max(args.timeout, 300.0) if qps >= 256 else args.timeout,
            os.path.join(log_dir, "{}_{}".format(name, qps)))
    finally:
        sampler.stop.set()
        sampler.join()
    if error is None:
        try:
            result["row"] = perftest.parse_result(client_out)
            result["row"]["pair_pss_kib"] = sampler.peak_pair_kib or None
            result["row"]["daemon_pss_kib"] = sampler.peak_daemon_kib or None
        except perftest.ParseError as e:
            error = str(e)
    result["error"] = error
    print(" {} ({:.1f} s)".format("ok" if error is None else "failed: " + error,
                                  time.monotonic() - started), file=sys.stderr)
    return result


def find_gid_index(args, env):
    """(index, None) or (None, reason): the first RoCE v2 GID of softverbs0."""
    if args.gid_index is not None:
        return args.gid_index, None
    try:
        out = subprocess.run([args.softverbs, "run", "--", "ibv_devinfo", "-v", "-d", DEVICE],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, timeout=60,
                             universal_newlines=True, errors="replace").stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "ibv_devinfo on softverbs failed: {}".format(e)
    index = perftest.roce_v2_gid_index(out)
    if index is None:
        why = perftest.failure_reason(out) or "no RoCE v2 GID listed"
        return None, "no RoCE v2 GID from ibv_devinfo: " + why
    return index, None


def _command(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_info():
    info = {"time": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "nproc": str(os.cpu_count()),
            "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    commit = _command(["git", "-C", REPO, "describe", "--always", "--dirty"])
    if commit:
        info["commit"] = commit
    for key, pkg in (("perftest", "perftest"), ("ucx", "ucx-utils")):
        version = _command(["dpkg-query", "-W", "-f", "${Version}", pkg])
        if version:
            info[key] = pkg + " " + version
    return info


def parse_args(argv):
    names = [p[0] for p in PLAN]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="few iterations (CI smoke)")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"),
                   help="softverbs build tree (default: %(default)s)")
    p.add_argument("--runtime-dir",
                   help="SOFTVERBS_RUNTIME_DIR to use (default: a fresh temp dir, "
                        "whose daemon is stopped and which is removed at exit)")
    p.add_argument("--only", action="append", default=[],
                   help="comma-separated benchmark names to run: " + ", ".join(names))
    p.add_argument("--timeout", type=float, help="seconds per server/client pair "
                   "(default 180, 60 with --quick)")
    p.add_argument("--gid-index", type=int, help="GID index for -x (default: first RoCE v2 GID)")
    p.add_argument("--results-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--rounds", type=int, help="runs of each perftest and UCX latency and 8-byte rate benchmark, "
                   "alternating; the median run is reported (default 3, 1 with --quick)")
    args = p.parse_args(argv)
    args.mode = "quick" if args.quick else "full"
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.timeout is None:
        args.timeout = 60.0 if args.quick else 180.0
    args.only = [n for chunk in args.only for n in chunk.split(",") if n]
    unknown = [n for n in args.only if n not in names]
    if unknown:
        p.error("unknown benchmark(s) {}; choose from {}".format(", ".join(unknown), ", ".join(names)))
    args.softverbs = os.path.join(os.path.abspath(args.build_dir), "bin", "softverbs")
    return args


def main(argv):
    args = parse_args(argv)
    plan = [p for p in PLAN if not args.only or p[0] in args.only]
    need_softverbs = any(tool != "ucx" for _, tool, _, _ in plan)
    if need_softverbs and not os.access(args.softverbs, os.X_OK):
        print("error: {} not found; build softverbs or pass --build-dir".format(args.softverbs),
              file=sys.stderr)
        return 2

    atexit.register(_kill_all)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = os.path.join(args.results_dir, "logs", stamp)
    os.makedirs(log_dir, exist_ok=True)

    own_runtime = args.runtime_dir is None
    # A short path under /tmp: the daemon's socket path must fit sockaddr_un.
    runtime_dir = tempfile.mkdtemp(prefix="svbench.") if own_runtime else os.path.abspath(args.runtime_dir)
    env = dict(os.environ, SOFTVERBS_RUNTIME_DIR=runtime_dir)
    if own_runtime:
        # Our private daemon goes with our temp dir; a daemon in a dir the
        # user named may be shared, so it is left running.
        atexit.register(lambda: shutil.rmtree(runtime_dir, ignore_errors=True))
        atexit.register(lambda: subprocess.run([args.softverbs, "daemon", "stop"], env=env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                               timeout=30) if os.path.exists(args.softverbs) else None)

    gid = (None, "not needed")
    if need_softverbs:
        gid = find_gid_index(args, env)
        print("softverbs: runtime dir {}, GID index {}".format(
            runtime_dir, gid[0] if gid[0] is not None else "none (" + gid[1] + ")"), file=sys.stderr)

    results = []
    repeated = {}  # (name, tool, size) -> runs of a latency benchmark, in round order
    repeated_groups = []  # (name, tool, kind, sizes) of the group tools measured in rounds
    for name, tool, kind, sizes in plan:
        if tool in GROUP_TOOLS:
            results.extend(measure_group(args, name, tool, kind, sizes, env, log_dir))
            if tool in ROUND_GROUP_TOOLS:
                repeated_groups.append((name, tool, kind, sizes))
                for r in results[-len(sizes):]:
                    repeated[(name, tool, r["size"])] = [r]
            continue
        for size in sizes:
            if tool == "softverbs-qps":
                results.append(measure_qps(args, name, size, gid, env, log_dir))
            else:
                results.append(measure(args, name, tool, kind, size, gid, env, log_dir))
                if in_rounds(tool, kind, size):
                    repeated[(name, tool, size)] = [results[-1]]
    # The latencies and message rates the targets compare (perftest's and
    # UCX's shared memory) are measured in rounds: each round runs every one
    # of them once.
    for round_no in range(2, args.rounds + 1):
        round_dir = os.path.join(log_dir, "round{}".format(round_no))
        os.makedirs(round_dir, exist_ok=True)
        for (name, tool, size), runs in repeated.items():
            if tool not in GROUP_TOOLS:
                runs.append(measure(args, name, tool, runs[0]["kind"], size, gid, env, round_dir))
        for name, tool, kind, sizes in repeated_groups:
            for r in measure_group(args, name, tool, kind, sizes, env, round_dir):
                repeated[(name, tool, r["size"])].append(r)
    results = [report.median_round(repeated[(r["name"], r["tool"], r["size"])])
               if (r["name"], r["tool"], r["size"]) in repeated else r for r in results]

    settings = "{} mode, {} s timeout per pair, GID index {}, logs in {}".format(
        args.mode, args.timeout, gid[0] if gid[0] is not None else "-",
        os.path.relpath(log_dir, REPO))
    text = report.markdown(results, machine_info(), settings)
    plotted = None
    if not args.no_plot:
        png = os.path.join(args.results_dir, "latest.png")
        try:
            report.plot(results, png)
            shutil.copyfile(png, os.path.join(args.results_dir, stamp + ".png"))
            plotted = True
        except Exception as e:  # a plot problem must not lose the table
            text += "\nPlot failed: {}\n".format(e)
    for base in ("latest", stamp):
        with open(os.path.join(args.results_dir, base + ".md"), "w") as f:
            f.write(text)
            if plotted:
                f.write("\n![latency and bandwidth]({}.png)\n".format(base))
    print(text)
    return 1 if any(r["error"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
