"""Multi-process integration tests of the softverbs control path.

Run by ctest (tests/integration/multiprocess/CMakeLists.txt) with
SOFTVERBS_RUNTIME_DIR (private to the test), SOFTVERBS_CLI (the softverbs
binary) and SOFTVERBS_IT_CLIENT (it_client) in the environment.
"""
import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import time
import unittest

CLI = os.environ.get("SOFTVERBS_CLI", "softverbs")
CLIENT = os.environ.get("SOFTVERBS_IT_CLIENT", "it_client")
RUNTIME_DIR = os.environ.get("SOFTVERBS_RUNTIME_DIR", "")
TIMEOUT = 30


def env_without_log():
    env = dict(os.environ)
    env.pop("SOFTVERBS_LOG", None)
    return env


# The memfds a context's library keeps ready for small registrations
# (kReadyBackingsKept).
READY_BACKINGS = 16


def status():
    out = subprocess.run([CLI, "status", "--json"], check=True, capture_output=True,
                         text=True, timeout=TIMEOUT).stdout
    return json.loads(out)


def clients_of(pid):
    return [c for c in status()["clients"] if c["pid"] == pid]


def daemon_pid():
    """The softverbsd serving RUNTIME_DIR."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"softverbsd") and RUNTIME_DIR.encode() in argv:
            return int(entry)
    return None


def shared_memory_fds(pid):
    """The daemon's descriptors that name shared memory (memfd or /dev/shm)."""
    found = []
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("/memfd:") or target.startswith("/dev/shm/"):
            found.append(target)
    return found


# Segments the daemon keeps for the device itself, whoever its clients are.
DEVICE_WIDE_SEGMENTS = ("softverbs-device-table",)


def shared_memory_maps(pid):
    """The daemon's shared-memory mappings other than the device-wide ones."""
    with open(f"/proc/{pid}/maps") as f:
        return [line for line in f if ("/memfd:" in line or "/dev/shm/" in line)
                and not any(name in line for name in DEVICE_WIDE_SEGMENTS)]


def dev_shm_entries_of(pid):
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    return [n for n in names if "softverbs" in n and str(pid) in n]


class HeldClient:
    """An it_client that holds one object of each kind until stdin closes."""

    def __init__(self):
        self.proc = subprocess.Popen([CLIENT, "hold"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError("it_client hold exited early")
        self.info = json.loads(line)
        self.pid = self.info["pid"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=TIMEOUT)


class TwoClients(unittest.TestCase):
    def test_two_processes_use_the_device_at_once(self):
        a, b = HeldClient(), HeldClient()
        try:
            qpns = a.info["qpns"] + b.info["qpns"]
            self.assertEqual(len(set(qpns)), 4, f"QP numbers must be unique: {qpns}")
            for n in qpns:
                self.assertGreater(n, 1)
            for c in (a, b):
                mine = clients_of(c.pid)
                self.assertEqual(len(mine), 1)
                self.assertEqual(len(mine[0]["qp"]), 2)
                self.assertEqual(sorted(q["qpn"] for q in mine[0]["qp"]), sorted(c.info["qpns"]))
                for kind in ("pd", "mr", "cq", "srq", "ah"):
                    self.assertEqual(len(mine[0][kind]), 1, kind)
        finally:
            a.close()
            b.close()
        # A normal exit without cleanup releases everything as well.
        self.assertEqual(clients_of(a.pid), [])
        self.assertEqual(clients_of(b.pid), [])


class KilledClient(unittest.TestCase):
    def test_sigkill_releases_every_object_and_shared_memory(self):
        survivor = HeldClient()
        try:
            pid = daemon_pid()
            self.assertIsNotNone(pid, "no softverbsd for " + RUNTIME_DIR)
            # The survivor's PD asks its library for the memfds it makes
            # ahead (abi/ibverbs/ready_backings.h: 16, made and offered by a
            # thread of its own a moment later); its registration (64 KiB)
            # takes one of them if they came first, else makes its own. The
            # baseline is taken once they are all there: 15 or 16, unchanged
            # for 0.2 s.
            deadline = time.time() + 10
            ready = status()["objects"]["mr_backings_ready"]
            while time.time() < deadline:
                time.sleep(0.2)
                now = status()["objects"]["mr_backings_ready"]
                if now == ready and now >= READY_BACKINGS - 1:
                    break
                ready = now
            self.assertIn(ready, (READY_BACKINGS - 1, READY_BACKINGS))
            baseline_fds = len(os.listdir(f"/proc/{pid}/fd"))
            baseline_shm = shared_memory_fds(pid)
            victim = HeldClient()
            self.assertEqual(len(clients_of(victim.pid)), 1)
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(timeout=TIMEOUT)
            deadline = time.time() + 10
            while clients_of(victim.pid) and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(clients_of(victim.pid), [],
                             "the killed client's objects are still listed")
            self.assertEqual(daemon_pid(), pid, "the daemon must survive a client's death")
            # Nothing of the victim is left in the daemon: no descriptor beyond
            # the baseline, no shared memory, no /dev/shm segment. The daemon
            # closes a `softverbs status` connection when its loop sees the
            # hang-up, which may come after the command has exited: the count
            # is read again until it settles (a leak never does).
            deadline = time.time() + 10
            while (len(os.listdir(f"/proc/{pid}/fd")) != baseline_fds
                   and time.time() < deadline):
                time.sleep(0.05)
            self.assertEqual(len(os.listdir(f"/proc/{pid}/fd")), baseline_fds)
            self.assertEqual(shared_memory_fds(pid), baseline_shm)
            self.assertEqual(dev_shm_entries_of(victim.pid), [])
            # The survivor's objects are untouched.
            mine = clients_of(survivor.pid)
            self.assertEqual(len(mine), 1)
            self.assertEqual(sorted(q["qpn"] for q in mine[0]["qp"]),
                             sorted(survivor.info["qpns"]))
        finally:
            survivor.close()
        # With every client gone, no per-client segment may stay mapped.
        pid = daemon_pid()
        if pid:
            deadline = time.time() + 10
            while status()["clients"] and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(shared_memory_maps(pid), [])


class LogChannel(unittest.TestCase):
    def run_bad_modify(self, env):
        proc = subprocess.run([CLIENT, "bad-modify"], env=env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        result = json.loads(proc.stdout)
        self.assertEqual(result["rc"], 22, "EINVAL")
        self.assertEqual(result["state"], 0, "still RESET")
        return proc.stderr

    def test_rejected_modify_is_explained_when_enabled(self):
        env = env_without_log()
        env["SOFTVERBS_LOG"] = "1"
        err = self.run_bad_modify(env)
        self.assertIn("RESET->INIT on RC requires IBV_QP_PORT", err)

    def test_silent_when_unset(self):
        err = self.run_bad_modify(env_without_log())
        self.assertEqual(err, "")


class DebianTools(unittest.TestCase):
    def run_tool(self, *argv):
        proc = subprocess.run([CLI, "run", "--", *argv], capture_output=True, text=True,
                              timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout

    def test_ibv_devices_lists_softverbs0(self):
        out = self.run_tool("/usr/bin/ibv_devices")
        self.assertIn("softverbs0", out)

    def test_ibv_devinfo_shows_active_ethernet_port_with_roce_v2_gid(self):
        out = self.run_tool("/usr/bin/ibv_devinfo", "-v")
        self.assertIn("hca_id:\tsoftverbs0", out)
        self.assertIn("PORT_ACTIVE", out)
        self.assertRegex(out, r"link_layer:\s+Ethernet")
        self.assertRegex(out, r"GID\[\s*\d+\]:\s+\S+, RoCE v2")

    def test_pyverbs_opens_the_device(self):
        script = ("from pyverbs.device import Context\n"
                  "ctx = Context(name='softverbs0')\n"
                  "attr = ctx.query_device()\n"
                  "port = ctx.query_port(1)\n"
                  "print(attr.phys_port_cnt, port.state)\n"
                  "ctx.close()\n")
        out = self.run_tool("/usr/bin/python3", "-c", script)
        self.assertEqual(out.split(), ["1", "4"])  # one port, IBV_PORT_ACTIVE

    def test_run_passes_the_programs_argv_verbatim(self):
        # `softverbs run -- prog args` used to append a stray "--" to the
        # program's argv (argparse programs then fail: rdma-core's tests).
        echo = "import sys; print(repr(sys.argv[1:]))"
        for args in (["a", "b"], ["a", "--", "b"], ["--x", "-y"], []):
            out = self.run_tool("/usr/bin/python3", "-c", echo, *args)
            self.assertEqual(out.strip(), repr(args))
        proc = subprocess.run([CLI, "run", "/usr/bin/python3", "-c", echo, "a", "-x"],
                              capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(proc.stdout.strip(), repr(["a", "-x"]), proc.stderr)


def _nobody():
    """The user `nobody` (Debian's base-passwd has it), or None."""
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


NOBODY = _nobody()


@unittest.skipUnless(os.geteuid() == 0, "needs root to run a process as another user")
@unittest.skipUnless(NOBODY, "no user 'nobody' on this machine")
class TwoUsers(unittest.TestCase):

    def as_nobody(self, argv, **kwargs):
        return subprocess.run(["/usr/bin/setpriv", f"--reuid={NOBODY.pw_uid}",
                               f"--regid={NOBODY.pw_gid}", "--clear-groups", *argv],
                              capture_output=True, text=True, timeout=TIMEOUT, **kwargs)

    def setUp(self):
        # Our daemon is up, in our 0700 runtime directory.
        subprocess.run([CLI, "run", "--", "/bin/true"], check=True, timeout=TIMEOUT)
        self.assertEqual(stat.S_IMODE(os.stat(RUNTIME_DIR).st_mode), 0o700)
        self.socket_path = os.path.join(RUNTIME_DIR, "softverbsd.sock")

    def test_other_user_cannot_use_this_users_runtime_dir(self):
        proc = self.as_nobody([CLI, "run", "--", "/usr/bin/ibv_devinfo"])
        self.assertNotEqual(proc.returncode, 0)
        self.assertNotIn("PORT_ACTIVE", proc.stdout)
        self.assertEqual([c for c in status()["clients"] if c["comm"] == "ibv_devinfo"], [])

    def test_other_user_cannot_reach_the_socket(self):
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                "try:\n  s.connect(sys.argv[1])\nexcept OSError as e:\n"
                "  print(e.errno); sys.exit(0)\n"
                "print('connected'); sys.exit(1)\n")
        proc = self.as_nobody(["/usr/bin/python3", "-c", code, self.socket_path])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_daemon_rejects_other_uid_even_if_the_socket_is_reachable(self):
        # Open the directory and socket to everyone for a moment: the daemon's
        # peer-credential check alone must turn the other user away.
        dir_mode = stat.S_IMODE(os.stat(RUNTIME_DIR).st_mode)
        sock_mode = stat.S_IMODE(os.stat(self.socket_path).st_mode)
        keepalive = HeldClient()  # keeps the daemon from idling out
        try:
            os.chmod(RUNTIME_DIR, 0o711)
            os.chmod(self.socket_path, 0o777)
            code = ("import socket,sys\n"
                    "s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                    "s.settimeout(10)\n"
                    "s.connect(sys.argv[1])\n"
                    "try:\n  s.send(b'\\0'*64)\n  data=s.recv(4096)\n"
                    "except OSError as e:\n  data=b''\n"
                    "print(len(data))\n")
            proc = self.as_nobody(["/usr/bin/python3", "-c", code, self.socket_path])
            self.assertEqual(proc.stdout.strip(), "0",
                             "the daemon answered another user: " + proc.stdout + proc.stderr)
        finally:
            os.chmod(RUNTIME_DIR, dir_mode)
            if os.path.exists(self.socket_path):
                os.chmod(self.socket_path, sock_mode)
            keepalive.close()


if __name__ == "__main__":
    unittest.main()
