"""What the checker believes: outcomes from the kernel's accounting, calls it drives itself, outputs it can
always compare, keys and files a program cannot reach, and a state folder nobody else controls."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from sandbox_helpers import CHILDREN, SMALL, sandbox_processes

from evalsuite.sandbox import Program, Sandbox
from evalsuite.sandbox import isolation as iso
from evalsuite.sandbox.checker import Checker, OutputMatcher

STDIN_TEST = [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
CALL_TEST = [
    {"input": "2", "output": "4", "testtype": "functional"},
    {"input": "3", "output": "6", "testtype": "functional"},
]


@pytest.fixture
def checker(sandbox: Sandbox) -> Checker:
    return Checker(sandbox, timeout_s=1.5)


def test_outcomes_come_from_the_real_wait_status(checker: Checker) -> None:
    aborted = checker.run("import os\nos.abort()", STDIN_TEST, None)[0]
    assert aborted.outcome == "runtime_error" and aborted.detail.startswith("SIGABRT"), aborted.detail
    exit102 = checker.run("import os\nos._exit(102)", STDIN_TEST, None)[0]
    assert (exit102.outcome, exit102.detail.split(":")[0]) == ("runtime_error", "exit code 102")
    raised = checker.run("raise MemoryError", STDIN_TEST, None)[0]
    assert raised.outcome == "runtime_error"  # the program's own MemoryError is not the limit
    segv = checker.run("import ctypes\nctypes.string_at(0)", STDIN_TEST, None)[0]
    assert segv.detail.startswith("SIGSEGV")


def test_memory_limit_bounds_the_whole_run(sandbox: Sandbox) -> None:
    """Four children of 100 MiB each under 256 MiB: a cgroup stops them together; without one, each process is
    capped at memory_mb (so the run at processes x memory_mb) and a child larger than that fails."""
    limits = replace(SMALL, processes=8, cpu_s=5.0, wall_s=20.0)
    if sandbox.memory_mode.startswith("cgroup"):
        r = sandbox.run(Program(CHILDREN % 100), limits)
        assert r.exit_code != 0 and r.memory_error, (r.exit_code, r.stdout, r.stderr[-300:])
    else:
        r = sandbox.run(Program(CHILDREN % (SMALL.memory_mb + 16)), limits)
        assert r.exit_code == 1 and r.stdout.strip() == b"[3, 3, 3, 3]", (r.stdout, r.stderr[-300:])


def test_functional_call_ignoring_sigalrm_and_swallowing_exceptions_times_out(checker: Checker) -> None:
    src = (
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
        "class Solution:\n    def f(self, x):\n        while True:\n            try:\n                pass\n"
        "            except:\n                pass\n"
    )
    started = time.monotonic()
    outcome = checker.run(src, CALL_TEST, "f")[0]
    assert outcome.outcome == "time_limit", outcome.detail
    assert time.monotonic() - started < 60


def test_slow_import_is_a_time_limit_not_a_pass(checker: Checker) -> None:
    src = "while True:\n    try:\n        pass\n    except BaseException:\n        pass\n"
    assert checker.run(src, CALL_TEST, "f")[0].outcome == "time_limit"


def test_results_cannot_be_forged(checker: Checker) -> None:
    """Frames written ahead (at import, before any call) or for the wrong call are refused."""
    ahead = (
        "import os, sys\nfd = int(sys.argv[5])\n"
        "os.write(fd, b'15\\n{\"ready\": true}' + b''.join(b'%d\\n' % len(x) + x for x in "
        '(b\'{"i": 0, "ok": 4}\', b\'{"i": 1, "ok": 6}\')))\n'
        "class Solution:\n    def f(self, x):\n        while True: pass\n"
    )
    first = checker.run(ahead, CALL_TEST, "f")[0]
    assert first.outcome == "runtime_error" and "protocol violation" in first.detail
    wrong_call = (
        "import os, sys\nfd = int(sys.argv[5])\nclass Solution:\n    def f(self, x):\n"
        '        os.write(fd, b\'18\\n{"i": 1, "ok": 6}\')\n        while True: pass\n'
    )
    assert checker.run(wrong_call, CALL_TEST, "f")[0].outcome in ("runtime_error", "time_limit")
    # Writing on the real stdout (what the old runner read results from) does nothing at all.
    via_stdout = (
        'import os\nos.write(1, b\'{"i": 0, "ok": "4"}\\n\')\nclass Solution:\n    def f(self, x):\n        return -1\n'
    )
    assert checker.run(via_stdout, CALL_TEST, "f")[0].outcome == "wrong_answer"


def test_huge_results_are_refused_before_parsing(checker: Checker) -> None:
    src = "class Solution:\n    def f(self, x):\n        return 'x' * 20_000_000\n"
    started = time.monotonic()
    outcome = checker.run(src, CALL_TEST, "f")[0]
    assert outcome.outcome == "wrong_answer" and "bytes, more than" in outcome.detail
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "printed",
    [
        b"sNaN",
        b"NaN",
        b"-sNaN123",
        b"1e999999999",
        b"Infinity",
        b"9" * 100_000,
        b"\xff\xfe\x00\x80",
        b"4 sNaN",
        b"0x4",
        b"\x00" * 1000,
    ],
)
def test_checker_never_crashes_on_printed_output(checker: Checker, printed: bytes) -> None:
    src = f"import sys\nsys.stdout.buffer.write({printed!r})\n"
    assert checker.run(src, STDIN_TEST, None)[0].outcome == "wrong_answer"


def test_decimal_comparison_still_accepts_equal_numbers() -> None:
    cmp = OutputMatcher()
    assert cmp.lines_match("4.0\n", "4")[0] and cmp.lines_match("1e2 3", "100 3.000")[0]
    assert not cmp.lines_match("sNaN", "4")[0] and not cmp.lines_match("4", "sNaN")[0]


@pytest.mark.parametrize(
    "returned, outcome",
    [
        ("float('nan')", "wrong_answer"),
        ("10 ** 100000", "wrong_answer"),
        ("object()", "wrong_answer"),
        ("(lambda l: (l.append(l), l)[1])([])", "wrong_answer"),
        ("eval('[' * 150 + ']' * 150)", "wrong_answer"),
        ("{4}", "wrong_answer"),
        ("(4,)", "wrong_answer"),
        ("4.0", "passed"),
        ("True and 4", "passed"),
    ],
)
def test_checker_never_crashes_on_returned_values(checker: Checker, returned: str, outcome: str) -> None:
    src = f"class Solution:\n    def f(self, x):\n        return {returned}\n"
    assert checker.run(src, CALL_TEST[:1], "f")[0].outcome == outcome


def test_keys_do_not_leak_between_programs(sandbox: Sandbox) -> None:
    name = "evalsuite-" + secrets.token_hex(4)
    add = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"for ring in (-4, -5, -3):\n    print(libc.syscall(248, b'user', {name.encode()!r}, b'SECRET', 6, "
        "ctypes.c_long(ring)))\n"
    )
    look = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"print([libc.syscall(250, 10, ctypes.c_long(r), b'user', {name.encode()!r}, 0) for r in (-4, -5, -3)])\n"
    )
    added = sandbox.run(Program(add))
    if all(int(x) < 0 for x in added.stdout.split()):
        pytest.skip("this kernel or container refuses keys to programs altogether")
    found = sandbox.run(Program(look))
    assert found.stdout.strip() == b"[-1, -1, -1]", found.stdout


def test_state_folder_owned_by_someone_else_is_refused(isolation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    base = Path(tempfile.mkdtemp(prefix="evalsuite-state-"))
    try:
        for name, prepare in (
            ("other-owner", lambda p: os.chown(p, 12345, 12345)),
            ("world-writable", lambda p: os.chmod(p, 0o777)),
            ("a-link", None),
        ):
            target = base / name
            if prepare is None:
                target.symlink_to(base)
            else:
                target.mkdir()
                prepare(target)
            monkeypatch.setattr(iso, "STATE_DIR", target)
            with pytest.raises(iso.StateDirError, match=str(target)):
                iso.state_dir()
    finally:
        shutil.rmtree(base)


def test_another_evaluators_sandbox_is_not_counted(uid_block: range) -> None:
    """A process under a sandbox uid outside our block (someone else's run) is none of our host check's business."""
    other = next(u for u in range(iso.UID_BASE, iso.UID_BASE + iso.UID_COUNT) if u not in uid_block)
    proc = subprocess.Popen(["sleep", "30"], user=other, group=other)
    try:
        time.sleep(0.1)
        assert sandbox_processes(uid_block) == []
        assert (proc.pid, other) in sandbox_processes(range(other, other + 1))
    finally:
        proc.kill()
        proc.wait()


def test_numpy_is_importable_single_threaded_within_the_memory_limit(sandbox: Sandbox) -> None:
    if "numpy" not in sandbox.describe()["packages"]:
        pytest.skip("numpy is not installed for this interpreter")
    src = (
        "import numpy as np, os\na = np.random.default_rng(0).random((300, 300))\nb = a @ a\n"
        "threads = [l for l in open('/proc/self/status') if l.startswith('Threads')][0].split()[1]\n"
        "print(round(float(b.trace()), 3) > 0, threads, os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "import numpy.linalg\nprint(numpy.__file__.startswith(os.getcwd()))\n"
        "try:\n    import boto3\nexcept ImportError:\n    print('no boto3')\n"
    )
    r = sandbox.run(Program(src))
    assert r.exit_code == 0, r.stderr[-500:]
    lines = r.stdout.decode().split("\n")
    assert lines[:3] == ["True 1 1", "False", "no boto3"]  # vetted packages only
    wrote = sandbox.run(Program("import numpy, os\nopen(os.path.join(os.path.dirname(numpy.__file__), 'x'), 'w')"))
    assert wrote.exit_code != 0
    assert any(m in wrote.stderr for m in (b"Read-only file system", b"Permission denied")), wrote.stderr[-300:]


HUNTER = """
import os, functools
print = functools.partial(print, flush=True)  # what it found survives being killed at a limit
seen = set()
def grab(path):
    try:
        if os.path.isdir(path):
            for name in os.listdir(path):
                grab(os.path.join(path, name)) if path.count('/') < 12 else None
        elif path not in seen:
            seen.add(path)
            with open(path, 'rb') as fh:
                print(path, fh.read(200))
    except OSError as e:
        print('denied', path, e.errno)
grab(%r)
for pid in os.listdir('/proc'):
    if pid.isdigit():
        for name in ('cmdline', 'environ'):
            try:
                args = open(f'/proc/{pid}/{name}', 'rb').read().split(b'\\0')
            except OSError:
                continue
            for arg in args:
                arg = arg.decode(errors='replace').split('=')[-1]
                if arg.startswith('/') and not arg.startswith(('/usr', '/bin', '/lib', '/proc', '/dev')):
                    grab(arg)
                    grab(os.path.dirname(arg))
        try:
            grab(os.readlink(f'/proc/{pid}/cwd'))
        except OSError:
            pass
"""


@pytest.mark.parametrize("mode", ["namespaces", "uid"])
def test_hostile_program_cannot_read_the_run_store(isolation: str, uid_block: range, mode: str) -> None:
    """A run store the evaluator has open (0644 in a 0755 project, its path on a command line) stays unreadable."""
    if mode == "namespaces" and isolation != "namespaces":
        pytest.skip("namespace isolation is not available here")
    token = "EXPECTED-" + secrets.token_hex(8)
    project = Path(tempfile.mkdtemp(prefix="evalsuite-project-", dir="/tmp"))
    store = project / "runs" / "baseline" / "livecodebench" / "run-1"
    store.mkdir(parents=True)
    for folder in (project, *store.parents):
        if str(folder).startswith(str(project)):
            os.chmod(folder, 0o755)
    os.chmod(store, 0o755)
    db = store / "records.sqlite"
    db.write_text(token)
    os.chmod(db, 0o644)
    (store / "manifest.json").write_text(token)
    os.chmod(store / "manifest.json", 0o644)
    holder = open(db, "rb")  # the evaluator keeps its store open while it grades
    named = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(db)])  # path on a command line
    try:
        sandbox = Sandbox(limits=replace(SMALL, cpu_s=5.0, wall_s=15.0), isolation=mode)  # type: ignore[arg-type]
        r = sandbox.run(Program(HUNTER % str(db)))
    finally:
        named.kill()
        named.wait()
        holder.close()
        shutil.rmtree(project)
    assert r.setup_error is None and b"denied" in r.stdout, r.stderr[-500:]
    assert token.encode() not in r.stdout + r.stderr


@pytest.mark.parametrize("mode", ["namespaces", "uid"])
def test_launcher_configuration_is_not_visible(isolation: str, uid_block: range, mode: str) -> None:
    """The launcher's configuration (host paths, uid, limits) is in its environment, which only root reads."""
    if mode == "namespaces" and isolation != "namespaces":
        pytest.skip("namespace isolation is not available here")
    src = (
        "import os\nfor pid in os.listdir('/proc'):\n    for name in ('cmdline', 'environ'):\n        try:\n"
        "            print(open(f'/proc/{pid}/{name}', 'rb').read())\n        except (OSError, ValueError):\n"
        "            pass\n"
    )
    r = Sandbox(limits=SMALL, isolation=mode).run(Program(src))  # type: ignore[arg-type]
    assert r.exit_code == 0 and b"launcher.py" in r.stdout, r.stderr  # the launcher is seen, its settings are not
    assert b"EVALSUITE_LAUNCH" not in r.stdout and b'"binds"' not in r.stdout
