"""The kernel view of softverbs0 seen by Python, by programs that never look
at it, by UCX (ucx_info, ucx_perftest) and by Open MPI over UCX.

Run by ctest (tests/integration/kernel_view/CMakeLists.txt) with
SOFTVERBS_RUNTIME_DIR, SOFTVERBS_CLI (the softverbs binary) and, for the MPI
class, SOFTVERBS_MPI_PINGPONG (mpi_pingpong built with mpicc). UCX and MPI
run as the unprivileged user `nobody`, in a runtime directory of its own.
Nothing needs /dev/infiniband or /sys/class/infiniband on the host: both are
checked to be what they were before, afterwards.
"""
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

CLI = os.environ.get("SOFTVERBS_CLI", "softverbs")
PINGPONG = os.environ.get("SOFTVERBS_MPI_PINGPONG", "")
TIMEOUT = 120
SKIP = 77  # ctest's SKIP_RETURN_CODE

HOST_PATHS = ["/dev/infiniband", "/sys/class/infiniband", "/sys/class/infiniband_verbs"]


def host_state():
    return {p: os.path.lexists(p) and sorted(os.listdir(p)) for p in HOST_PATHS}


def run(argv, **kwargs):
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)


# What a Python program sees under `softverbs run`: os.path, open, os.listdir,
# os.stat, os.readlink, os.path.realpath (printed as JSON by a child).
PROBE = r"""
import json, os, stat
dev = "/sys/class/infiniband/softverbs0"
node = os.stat("/dev/infiniband/uverbs0")
net = os.listdir(dev + "/device/net")
print(json.dumps({
    "classes": os.listdir("/sys/class/infiniband"),
    "node_is_chr": stat.S_ISCHR(node.st_mode),
    "node_rdev": [os.major(node.st_rdev), os.minor(node.st_rdev)],
    "node_exists": os.path.exists("/dev/infiniband/uverbs0"),
    "node_access": os.access("/dev/infiniband/uverbs0", os.R_OK | os.W_OK),
    "node_type": open(dev + "/node_type").read(),
    "state": open(dev + "/ports/1/state").read(),
    "ibdev": open("/sys/class/infiniband_verbs/uverbs0/ibdev").read(),
    "net": net,
    "net_link": os.readlink(dev + "/device/net/" + net[0]) if net else None,
    "uverbs_device": os.path.realpath("/sys/class/infiniband_verbs/uverbs0/device"),
    "is_dir": os.path.isdir(dev + "/ports/1/gids"),
}))
"""

# A program that never looks at RDMA paths prints what it sees of ordinary
# ones; with and without the interposer it must print the same.
ORDINARY = r"""
import json, os
out = {}
for p in ["/etc/passwd", "/etc", "/usr/bin/env", "/dev/null", "/sys/class/net",
          "/proc/cpuinfo", "/sys/class/infiniband_mad", "/no/such/path"]:
    try:
        st = os.lstat(p)
        out[p] = [st.st_mode, st.st_rdev, st.st_ino, os.path.realpath(p),
                  sorted(os.listdir(p)) if os.path.isdir(p) and not p.startswith("/proc") else None]
    except OSError as e:
        out[p] = e.errno
out["/etc/hostname"] = open("/etc/hostname").read()
print(json.dumps(out, sort_keys=True))
"""


class PythonPrograms(unittest.TestCase):
    def setUp(self):
        self.before = host_state()

    def tearDown(self):
        self.assertEqual(host_state(), self.before, "the host's RDMA paths changed")

    def test_python_sees_the_device(self):
        proc = run([CLI, "run", "--", sys.executable, "-c", PROBE])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        seen = json.loads(proc.stdout)
        self.assertEqual(seen["classes"], ["softverbs0"])
        self.assertTrue(seen["node_is_chr"])
        self.assertEqual(seen["node_rdev"], [231, 192])
        self.assertTrue(seen["node_exists"])
        self.assertTrue(seen["node_access"])
        self.assertEqual(seen["node_type"], "1: CA\n")
        self.assertEqual(seen["state"], "4: ACTIVE\n")
        self.assertEqual(seen["ibdev"], "softverbs0\n")
        self.assertEqual(len(seen["net"]), 1)
        self.assertEqual(seen["net_link"], "/sys/class/net/" + seen["net"][0])
        self.assertEqual(seen["uverbs_device"], "/sys/class/infiniband/softverbs0/device")
        self.assertTrue(seen["is_dir"])

    def test_the_view_is_only_there_under_softverbs_run(self):
        proc = run([CLI, "run", "--no-kernel-view", "--", sys.executable, "-c",
                    "import os; print(os.path.exists('/sys/class/infiniband/softverbs0'))"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "False")

    def test_ordinary_paths_are_unchanged(self):
        plain = run([sys.executable, "-c", ORDINARY])
        viewed = run([CLI, "run", "--", sys.executable, "-c", ORDINARY])
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(viewed.returncode, 0, viewed.stderr)
        a, b = json.loads(plain.stdout), json.loads(viewed.stdout)
        self.assertEqual(a, b)

    def test_shell_tools_list_it(self):
        # rdma-core's tests find the netdev with `ls .../device/net/`.
        proc = run([CLI, "run", "--", "sh", "-c",
                    "ls /sys/class/infiniband/softverbs0/device/net/ && "
                    "ls -l /dev/infiniband/uverbs0 && "
                    "cat /sys/class/infiniband/softverbs0/ports/1/gid_attrs/types/1"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertTrue(lines[0])
        self.assertTrue(lines[1].startswith("crw-rw-rw-"), lines[1])
        self.assertIn("231, 192", lines[1])
        self.assertIn(lines[2], ("RoCE v2", "IB/RoCE v1"))

    def test_softverbs_env_gives_the_same_setup(self):
        env_out = run([CLI, "env"])
        self.assertEqual(env_out.returncode, 0, env_out.stderr)
        env = dict(os.environ)
        for line in env_out.stdout.splitlines():
            self.assertTrue(line.startswith("export "), line)
            name, _, value = line[len("export "):].partition("=")
            env[name] = value.strip("'")
        self.assertIn("libsoftverbs-kernel-view.so", env["LD_PRELOAD"])
        child = run([sys.executable, "-c", PROBE], env=env)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(json.loads(child.stdout)["node_rdev"], [231, 192])


def _nobody():
    """The user `nobody` (Debian's base-passwd has it), or None."""
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


NOBODY = _nobody()


@unittest.skipIf(os.geteuid() == 0 and not NOBODY,
                 "root, and no user 'nobody' on this machine to run the programs as")
class AsNobody(unittest.TestCase):
    """Runs UCX and MPI programs as `nobody` in a runtime dir of its own (run
    by an unprivileged user, as that user: it is unprivileged already)."""
    SWITCH = os.geteuid() == 0

    def setUp(self):
        self.before = host_state()
        self.rt = tempfile.mkdtemp(prefix="sv-kv-")
        if self.SWITCH:
            os.chown(self.rt, NOBODY.pw_uid, NOBODY.pw_gid)
        os.chmod(self.rt, 0o700)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.as_nobody([CLI, "daemon", "stop"])
        shutil.rmtree(self.rt, ignore_errors=True)
        self.assertEqual(host_state(), self.before, "the host's RDMA paths changed")

    def env(self, extra=None):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.rt, "TMPDIR": self.rt,
               "SOFTVERBS_RUNTIME_DIR": self.rt, "SOFTVERBS_IDLE_TIMEOUT": "5"}
        env.update(extra or {})
        return env

    def nobody_argv(self, argv):
        if not self.SWITCH:
            return list(argv)
        return ["/usr/bin/setpriv", f"--reuid={NOBODY.pw_uid}",
                f"--regid={NOBODY.pw_gid}", "--clear-groups", *argv]

    def as_nobody(self, argv, extra=None):
        return run(self.nobody_argv(argv), env=self.env(extra), cwd=self.rt)

    def start_as_nobody(self, argv, extra=None):
        p = subprocess.Popen(self.nobody_argv(argv), env=self.env(extra), cwd=self.rt,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(shutil.which("ucx_perftest") and shutil.which("ucx_info"),
                     "ucx-utils is not installed")
class Ucx(AsNobody):
    UCP_ENV = {"UCX_TLS": "rc_verbs,ud_verbs,self", "UCX_NET_DEVICES": "softverbs0:1",
               "UCX_LOG_LEVEL": "info"}

    def test_ucx_info_lists_softverbs0(self):
        proc = self.as_nobody([CLI, "run", "--", "ucx_info", "-d"])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        out = proc.stdout
        self.assertIn("# Memory domain: softverbs0", out)
        section = out[out.index("# Memory domain: softverbs0"):]
        section = section.split("# Memory domain:", 2)[1]
        for tl in ("rc_verbs", "ud_verbs"):
            self.assertIn(f"Transport: {tl}", section)
        self.assertIn("Device: softverbs0:1", section)

    def pair(self, client_args, extra=None):
        """A ucx_perftest server/client pair; returns the client's output."""
        port = str(free_port())
        server = self.start_as_nobody([CLI, "run", "--", "ucx_perftest", "-p", port], extra)
        client = None
        for _ in range(100):  # the server listens within a few seconds
            time.sleep(0.2)
            client = self.as_nobody([CLI, "run", "--", "ucx_perftest", "-p", port, "127.0.0.1",
                                     *client_args], extra)
            if "Connection refused" not in client.stdout + client.stderr:
                break
        out = client.stdout + client.stderr
        try:
            server_out, _ = server.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
            server_out, _ = server.communicate()
        self.assertEqual(client.returncode, 0, out)
        self.assertEqual(server.returncode, 0, server_out)
        self.assertRegex(out, r"Final:\s+\d+")
        return out

    def test_uct_rc_verbs(self):
        for t in (["-t", "put_lat", "-n", "1000"], ["-t", "am_lat", "-n", "1000"],
                  ["-t", "put_bw", "-s", "65536", "-D", "zcopy", "-n", "500"]):
            with self.subTest(test=t[1]):
                self.pair(["-d", "softverbs0:1", "-x", "rc_verbs", *t])

    def test_uct_ud_verbs(self):
        # ud_verbs has no put: its latency and bandwidth runs are active messages.
        for t in (["-t", "am_lat", "-n", "1000"], ["-t", "am_bw", "-s", "512", "-D", "bcopy", "-n", "1000"]):
            with self.subTest(test=t[1]):
                self.pair(["-d", "softverbs0:1", "-x", "ud_verbs", *t])

    def test_ucp_tag(self):
        for t in (["-t", "tag_lat", "-n", "1000"], ["-t", "tag_bw", "-s", "1048576", "-n", "50"]):
            with self.subTest(test=t[1]):
                out = self.pair(t, self.UCP_ENV)
                # UCX says which transport and device each endpoint uses.
                self.assertRegex(out, r"ep_cfg\[\d+\]: tag\([^)]*(rc|ud)_verbs/softverbs0:1")


@unittest.skipUnless(shutil.which("mpirun"), "openmpi-bin is not installed")
class Mpi(AsNobody):
    def test_two_rank_pingpong_over_ucx_on_softverbs0(self):
        if not PINGPONG:
            self.skipTest("mpi_pingpong was not built (no MPI compiler)")
        proc = self.as_nobody(
            [CLI, "run", "--", "mpirun", "--oversubscribe", "-np", "2",
             "--mca", "pml", "ucx", "--mca", "btl", "^openib,uct",
             "-x", "UCX_NET_DEVICES=softverbs0:1", "-x", "UCX_TLS=rc_verbs,ud_verbs,self",
             "-x", "UCX_LOG_LEVEL=info", PINGPONG, "200", "20"])
        out = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, 0, out)
        self.assertRegex(out, r"ep_cfg\[\d+\]: tag\([^)]*rc_verbs/softverbs0:1")
        self.assertRegex(out, r"mpi_pingpong: latency [\d.]+ us")
        self.assertRegex(out, r"mpi_pingpong: bandwidth [\d.]+ MiB/s")
        print(*[l for l in out.splitlines() if l.startswith("mpi_pingpong:")], sep="\n")


def main(argv):
    """Runs the named test classes; exit 77 (ctest's skip) if every test
    skipped, 1 on a failure, 0 otherwise."""
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(name, sys.modules[__name__])
                               for name in argv[1:])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun and len(result.skipped) == result.testsRun:
        print("SKIP: " + "; ".join(sorted({why for _, why in result.skipped})))
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
