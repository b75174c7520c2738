#!/usr/bin/python3
"""Runs rdma-core's own test suite (Debian's python3-pyverbs ships it in
/usr/share/doc/rdma-core/tests) against softverbs0 as a conformance gate.

    run_rdma_core_tests.py --cli build/bin/softverbs [--excludes FILE]
                           [--modules test_cq,test_qp] [--timeout 60]
                           [--json results.json] [--keep] [--strict]
                           [--personality mlx5]

What it does:
  1. copies the shipped tests to a temp dir and gunzips them;
  2. reads the first "RoCE v2" GID index of softverbs0 port 1 from
     `softverbs run -- ibv_devinfo -v`;
  3. lists the test ids and runs them (this script again, in --inner mode)
     under `softverbs run --` with --dev softverbs0 --port 1 --gid <index>,
     in a private runtime dir (SOFTVERBS_RUNTIME_DIR if set, else a fresh one);
     every test has a timeout (SIGALRM inside, a watchdog outside that kills a
     hung run and resumes after the hung test);
  4. compares the outcome of every test (pass/skip/fail/error/timeout) with the
     exclude list: one test id per line, then its reason.

The gate fails (exit 1) on a test that neither passes nor skips and is not
listed, and on a listed entry without a reason. Listed tests that pass now are
reported (they should leave the list); with --strict they fail the gate too.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SHIPPED_TESTS = '/usr/share/doc/rdma-core/tests'
DEVICE = 'softverbs0'
PORT = 1
OK_STATUSES = ('pass', 'skip', 'xfail')
BAD_STATUSES = ('fail', 'error', 'timeout', 'crash')


# ---------------------------------------------------------------------------
# Inner mode: runs inside `softverbs run --`, in the copied tests' parent dir.
# ---------------------------------------------------------------------------

def inner_main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True)       # dir holding tests/
    ap.add_argument('--results', required=True)    # JSON lines, appended
    ap.add_argument('--ids')                       # file: test ids to run
    ap.add_argument('--list', action='store_true')
    ap.add_argument('--gid', required=True)
    ap.add_argument('--timeout', type=int, default=60)
    args = ap.parse_args(argv)

    import traceback
    import unittest

    sys.path[:0] = [os.path.join(args.root, 'tests'), args.root]
    # rdma-core's tests read their configuration from args_parser.
    sys.argv = [sys.argv[0], '--dev', DEVICE, '--port', str(PORT),
                '--gid', args.gid]
    from args_parser import parser
    parser.parse_args()
    import tests as rdma_tests  # imports every test_*.py module

    out = open(args.results, 'a', buffering=1)

    def emit(**rec):
        out.write(json.dumps(rec) + '\n')
        out.flush()

    loader = unittest.TestLoader()

    def flatten(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                yield from flatten(t)
            else:
                yield t

    if args.list:
        for mod in rdma_tests.__test_modules__:
            for t in flatten(loader.loadTestsFromModule(mod)):
                emit(kind='id', id=t.id())
        return 0

    with open(args.ids) as f:
        ids = [line.strip() for line in f if line.strip()]
    suite = unittest.TestSuite()
    for tid in ids:
        suite.addTests(flatten(loader.loadTestsFromName(tid)))

    class Timeout(Exception):
        pass

    def on_alarm(signum, frame):
        raise Timeout(f'test timed out after {args.timeout} s')

    signal.signal(signal.SIGALRM, on_alarm)

    def text(err):
        return ''.join(traceback.format_exception(*err))

    class Result(unittest.TestResult):
        def __init__(self):
            super().__init__()
            self.outcome = {}
            self.fixture_errors = []

        def _set(self, test, status, detail=''):
            tid = test.id()
            prev = self.outcome.get(tid)
            # A test with subtests keeps its worst outcome.
            if prev is None or prev[0] in OK_STATUSES:
                self.outcome[tid] = (status, detail)

        def startTest(self, test):
            super().startTest(test)
            emit(kind='start', id=test.id(), t=time.time())
            signal.alarm(args.timeout)

        def stopTest(self, test):
            signal.alarm(0)
            status, detail = self.outcome.get(test.id(), ('pass', ''))
            emit(kind='result', id=test.id(), status=status, detail=detail)
            super().stopTest(test)

        def addSuccess(self, test):
            self._set(test, 'pass')

        def addSkip(self, test, reason):
            self._set(test, 'skip', reason)

        def addExpectedFailure(self, test, err):
            self._set(test, 'xfail', text(err))

        def addUnexpectedSuccess(self, test):
            self._set(test, 'fail', 'unexpected success')

        def addFailure(self, test, err):
            self._set(test, 'fail', text(err))

        def addError(self, test, err):
            if not isinstance(test, unittest.TestCase):
                # setUpClass/setUpModule failed: its tests do not start;
                # they get this error below.
                self.fixture_errors.append(f'{test.id()}\n{text(err)}')
                return
            status = 'timeout' if err[0] is Timeout else 'error'
            self._set(test, status, text(err))

        def addSubTest(self, test, subtest, err):
            if err is not None:
                status = 'fail' if issubclass(err[0], test.failureException) \
                    else 'error'
                self._set(test, status, f'{subtest.id()}\n{text(err)}')

    result = Result()
    suite.run(result)
    fixture = '\n'.join(result.fixture_errors) or 'not run'
    for tid in ids:
        if tid not in result.outcome:
            emit(kind='result', id=tid, status='error', detail=fixture)
    return 0


# ---------------------------------------------------------------------------
# Outer mode: prepares, runs the inner mode under `softverbs run`, judges.
# ---------------------------------------------------------------------------

def log(msg):
    print(msg, flush=True)


def copy_tests(src, dst_root):
    dst = os.path.join(dst_root, 'tests')
    os.makedirs(dst)
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            continue
        if name.endswith('.gz'):
            with gzip.open(path, 'rb') as fin, \
                    open(os.path.join(dst, name[:-3]), 'wb') as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy(path, os.path.join(dst, name))
    return dst


def roce_v2_gid_index(cli, env):
    out = subprocess.run([cli, 'run', '--', 'ibv_devinfo', '-v', '-d', DEVICE,
                          '-i', str(PORT)], env=env, capture_output=True,
                         text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f'ibv_devinfo failed ({out.returncode}): {out.stderr}')
    for line in out.stdout.splitlines():
        m = re.match(r'\s*GID\[\s*(\d+)\]:\s*\S+,\s*RoCE v2\s*$', line)
        if m:
            return int(m.group(1))
    sys.exit(f'no RoCE v2 GID on {DEVICE} port {PORT}:\n{out.stdout}')


def read_excludes(path):
    """Returns ({test id: reason}, [problems])."""
    excludes, problems = {}, []
    if not path:
        return excludes, problems
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            parts = line.split(None, 1)
            tid = parts[0]
            reason = parts[1].strip() if len(parts) > 1 else ''
            if not reason:
                problems.append(f'{path}:{n}: {tid}: no reason given')
            if tid in excludes:
                problems.append(f'{path}:{n}: {tid}: listed twice')
            excludes[tid] = reason
    return excludes, problems


def read_records(path, offset):
    with open(path) as f:
        f.seek(offset)
        data = f.read()
    # Only complete lines; a partial one is read next time.
    end = data.rfind('\n') + 1
    recs = [json.loads(line) for line in data[:end].splitlines() if line]
    return recs, offset + len(data[:end].encode())


def run_inner(cli, env, workdir, results, extra, timeout_s):
    cmd = [cli, 'run', '--', '/usr/bin/python3', os.path.abspath(__file__),
           '--inner', '--root', workdir, '--results', results] + extra
    logf = open(os.path.join(workdir, 'run.log'), 'a')
    return subprocess.Popen(cmd, env=env, cwd=workdir, stdout=logf,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def list_tests(cli, env, workdir, gid, modules):
    results = os.path.join(workdir, 'list.jsonl')
    proc = run_inner(cli, env, workdir, results,
                     ['--list', '--gid', str(gid)], 0)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        sys.exit('listing the tests timed out')
    if proc.returncode != 0:
        with open(os.path.join(workdir, 'run.log')) as f:
            sys.exit(f'listing the tests failed:\n{f.read()}')
    recs, _ = read_records(results, 0)
    ids = [r['id'] for r in recs if r['kind'] == 'id']
    if modules:
        ids = [i for i in ids if i.split('.')[1] in modules]
    return ids


def run_tests(cli, env, workdir, gid, ids, timeout_s):
    """Runs ids; a hung or crashed run is resumed after the culprit."""
    outcome = {}
    results = os.path.join(workdir, 'results.jsonl')
    open(results, 'w').close()
    offset = 0
    remaining = list(ids)
    while remaining:
        idfile = os.path.join(workdir, 'ids.txt')
        with open(idfile, 'w') as f:
            f.write('\n'.join(remaining) + '\n')
        proc = run_inner(cli, env, workdir, results,
                         ['--ids', idfile, '--gid', str(gid),
                          '--timeout', str(timeout_s)], timeout_s)
        current, started = None, time.time()
        while True:
            recs, offset = read_records(results, offset)
            for r in recs:
                if r['kind'] == 'start':
                    current, started = r['id'], time.time()
                elif r['kind'] == 'result':
                    outcome[r['id']] = (r['status'], r['detail'])
                    current = None
            if proc.poll() is not None:
                recs, offset = read_records(results, offset)
                if recs:
                    continue  # drain what came last
                break
            if current and time.time() - started > timeout_s + 15:
                log(f'{current}: hung past the timeout; killing the run')
                kill_group(proc)
                outcome[current] = ('timeout',
                                    f'killed after {timeout_s + 15} s')
                current = None
                break
            time.sleep(0.1)
        if current:
            outcome[current] = ('crash', f'the test process exited '
                                f'({proc.returncode}) during the test')
        before = len(remaining)
        remaining = [i for i in remaining if i not in outcome]
        if remaining and len(remaining) == before:
            # No progress: a fixture failure or the runner itself died.
            with open(os.path.join(workdir, 'run.log')) as f:
                tail = f.read()[-4000:]
            for i in remaining:
                outcome[i] = ('error', f'not run; runner output:\n{tail}')
            remaining = []
    return outcome


NR_HUGEPAGES = '/proc/sys/vm/nr_hugepages'
HUGEPAGES_FOR_RUN = 8  # 16 MiB of 2 MiB pages: rdma-core's huge-page tests map one


def reserve_huge_pages():
    """Reserves a few huge pages for the run when none are and we may (root):
    rdma-core's huge-page tests skip without them. Returns the count to put
    back afterwards, or None when nothing was changed."""
    try:
        with open(NR_HUGEPAGES) as f:
            before = int(f.read())
        if before > 0 or os.geteuid() != 0:
            return None
        with open(NR_HUGEPAGES, 'w') as f:
            f.write(str(HUGEPAGES_FOR_RUN))
        log(f'reserved {HUGEPAGES_FOR_RUN} huge pages for the run')
        return before
    except (OSError, ValueError) as e:
        log(f'huge pages not reserved ({e}): the huge-page tests skip')
        return None


def restore_huge_pages(before):
    if before is None:
        return
    try:
        with open(NR_HUGEPAGES, 'w') as f:
            f.write(str(before))
    except OSError as e:
        log(f'could not give the huge pages back ({e})')


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--cli', required=True, help='the softverbs CLI')
    ap.add_argument('--excludes', help='exclude list')
    ap.add_argument('--tests', default=SHIPPED_TESTS,
                    help='rdma-core tests dir (default: %(default)s)')
    ap.add_argument('--modules', help='comma-separated test modules '
                    '(test_cq,...); default: all')
    ap.add_argument('--timeout', type=int, default=60,
                    help='per-test timeout, seconds (default: %(default)s)')
    ap.add_argument('--json', help='write every outcome here')
    ap.add_argument('--keep', action='store_true',
                    help='keep the work dir (tests, run.log)')
    ap.add_argument('--strict', action='store_true',
                    help='a listed test that passes fails the gate')
    ap.add_argument('--personality', choices=('generic', 'mlx5'),
                    help='what softverbs0 reports itself as (SOFTVERBS_PERSONALITY); '
                    'mlx5 runs the test_mlx5_* modules on their mlx5 paths')
    ap.add_argument('--mlx5-modules', action='store_true',
                    help='run every shipped test_mlx5_* module (with --personality mlx5)')
    ap.add_argument('-v', '--verbose', action='store_true',
                    help='print every test and its outcome')
    if len(sys.argv) > 1 and sys.argv[1] == '--inner':
        sys.exit(inner_main(sys.argv[2:]))
    args = ap.parse_args()
    # The inner run has the work dir as its cwd: no relative paths.
    args.cli = os.path.abspath(args.cli) if os.sep in args.cli \
        else shutil.which(args.cli) or args.cli
    if args.excludes:
        args.excludes = os.path.abspath(args.excludes)

    if not os.path.isdir(args.tests):
        log(f'{args.tests} missing (Debian: apt-get install python3-pyverbs)')
        sys.exit(77)  # ctest SKIP_RETURN_CODE
    excludes, problems = read_excludes(args.excludes)
    modules = set(args.modules.split(',')) if args.modules else None
    if args.mlx5_modules:
        modules = (modules or set()) | {
            re.sub(r'\.py(\.gz)?$', '', f) for f in os.listdir(args.tests)
            if f.startswith('test_mlx5_') and re.search(r'\.py(\.gz)?$', f)}

    workdir = tempfile.mkdtemp(prefix='sv-rdma-core-')
    env = dict(os.environ)
    own_rt = 'SOFTVERBS_RUNTIME_DIR' not in env
    if own_rt:
        env['SOFTVERBS_RUNTIME_DIR'] = os.path.join(workdir, 'rt')
        os.mkdir(env['SOFTVERBS_RUNTIME_DIR'], 0o700)
    env.setdefault('SOFTVERBS_IDLE_TIMEOUT', '5')
    # test_rdmacm's multicast uses the address of this machine's interface:
    # its groups stay on this host (docs/roce.md, "Multicast").
    env.setdefault('SOFTVERBS_ROCE_MCAST', 'host')
    env['PYTHONDONTWRITEBYTECODE'] = '1'
    if args.personality:
        env['SOFTVERBS_PERSONALITY'] = args.personality
    t0 = time.time()
    huge_pages_before = reserve_huge_pages()
    try:
        copy_tests(args.tests, workdir)
        gid = roce_v2_gid_index(args.cli, env)
        ids = list_tests(args.cli, env, workdir, gid, modules)
        log(f'rdma-core tests: {len(ids)} tests on {DEVICE} port {PORT} '
            f'GID index {gid} (RoCE v2), runtime dir '
            f'{env["SOFTVERBS_RUNTIME_DIR"]}')
        outcome = run_tests(args.cli, env, workdir, gid, ids, args.timeout)
    finally:
        restore_huge_pages(huge_pages_before)
        if own_rt:
            subprocess.run([args.cli, 'daemon', 'stop'], env=env,
                           capture_output=True)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f'work dir kept: {workdir}')

    counts = {'passed': 0, 'skipped': 0, 'excluded': 0, 'failed': 0}
    unexpected, now_passing = [], []
    for tid in ids:
        status, detail = outcome[tid]
        listed = tid in excludes
        if args.verbose:
            log(f'{status:8} {tid}{"  (listed)" if listed else ""}')
        if status in BAD_STATUSES:
            if listed:
                counts['excluded'] += 1
            else:
                counts['failed'] += 1
                unexpected.append((tid, status, detail))
        else:
            counts['passed' if status == 'pass' else 'skipped'] += 1
            if listed and status == 'pass':
                now_passing.append(tid)
    stale = [t for t in excludes if t not in outcome and
             (modules is None or t.split('.')[1] in modules)]

    for tid, status, detail in unexpected:
        log(f'\n==== {status.upper()}: {tid} (not in the exclude list)\n'
            f'{detail.rstrip()}')
    if now_passing:
        log('\nListed in the exclude list but passing now (remove them):')
        for t in now_passing:
            log(f'  {t}')
    if stale:
        log('\nListed in the exclude list but not found in the suite:')
        for t in stale:
            log(f'  {t}')
    for p in problems:
        log(f'exclude list: {p}')
    log(f'\n{len(ids)} tests in {time.time() - t0:.0f} s: '
        f'{counts["passed"]} passed, {counts["skipped"]} skipped, '
        f'{counts["excluded"]} excluded (failed as listed), '
        f'{counts["failed"]} failed')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'counts': counts,
                       'tests': {t: {'status': outcome[t][0],
                                     'listed': t in excludes,
                                     'detail': outcome[t][1]} for t in ids}},
                      f, indent=1)
    failed = unexpected or problems or (args.strict and now_passing)
    log('conformance gate: ' + ('FAILED' if failed else 'passed'))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
