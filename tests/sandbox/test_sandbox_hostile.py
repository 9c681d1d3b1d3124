"""Hostile programs: each must be contained, and the host is checked afterwards (see conftest.host_check).

Each runs in root's sandbox (as CI runs: the sandbox must drop privileges)
and in an unprivileged user's (a user namespace under the user's own uid:
only the namespaces keep the program from the user's files, network and
processes), so a program cannot read the evaluator's files, signal it or
outlive its run.
"""

from __future__ import annotations

import os
import secrets
import select
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_helpers import SMALL

from evalsuite.sandbox import Program, Sandbox
from evalsuite.sandbox.checker import Checker


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    yield srv
    srv.close()


def test_no_connection_to_a_loopback_listener(sandbox: Sandbox, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    src = (
        "import socket\n"
        f"for family, addr in ((socket.AF_INET, ('127.0.0.1', {port})),):\n"
        "    try:\n"
        "        s = socket.socket(family, socket.SOCK_STREAM)\n"
        "        s.settimeout(1)\n"
        "        s.connect(addr)\n"
        "        s.sendall(b'hello')\n"
        "        print('CONNECTED')\n"
        "    except OSError as e:\n"
        "        print('refused', e)\n"
    )
    r = sandbox.run(Program(src))
    assert b"refused" in r.stdout, (r.stdout, r.stderr)  # the program ran and its connect() failed
    assert b"CONNECTED" not in r.stdout
    readable, _, _ = select.select([listener], [], [], 0.2)
    assert readable == [], "the listener saw a connection from the sandbox"


CTYPES_CONNECT = """
import ctypes, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
address = struct.pack('=H', socket.AF_INET) + struct.pack('!H', %d) + socket.inet_aton('127.0.0.1') + bytes(8)
if fd < 0:
    print('refused socket', ctypes.get_errno())
elif libc.connect(fd, address, len(address)) == 0:
    libc.write(fd, b'hello', 5)
    print('CONNECTED')
else:
    print('refused connect', ctypes.get_errno())
"""


def test_no_connection_through_ctypes(sandbox: Sandbox, namespaces: None, listener: socket.socket) -> None:
    """socket() and connect() straight from libc, past any check inside the interpreter: only the network
    namespace stands in the way."""
    r = sandbox.run(Program(CTYPES_CONNECT % listener.getsockname()[1]))
    assert b"refused connect 101" in r.stdout, (r.stdout, r.stderr)  # ENETUNREACH: no interface is up
    readable, _, _ = select.select([listener], [], [], 0.2)
    assert readable == [], "the listener saw a connection from the sandbox"


def test_cannot_write_outside_scratch(sandbox: Sandbox, namespaces: None, home: Path) -> None:
    open_dir = Path(tempfile.mkdtemp(prefix="evalsuite-open-", dir="/tmp"))
    os.chmod(open_dir, 0o777)  # world-writable: only the mount namespace keeps the program out
    # /tmp inside the sandbox is its own scratch, so writing there is allowed but must not reach the host's /tmp.
    targets = [
        open_dir / "pwned",
        Path(__file__).resolve().parent / "pwned",
        Path("/usr/pwned"),
        home / "pwned",  # the evaluating user's own folder: its permissions let the user's uid in
        Path("/tmp/evalsuite-pwned-" + secrets.token_hex(4)),
    ]
    src = (
        "import os\n"
        + "".join(
            f"try:\n    open({str(t)!r}, 'w').write('x')\n    print('WROTE', {str(t)!r})\nexcept OSError as e:\n    print('denied', e.errno)\n"
            for t in targets
        )
        + "open('inside.txt', 'w').write('ok')\nprint('scratch ok')\n"
    )
    try:
        r = sandbox.run(Program(src))
        assert b"scratch ok" in r.stdout, r.stdout + r.stderr
        assert [t for t in targets[:4] if b"WROTE " + str(t).encode() in r.stdout] == []
        assert [t for t in targets if t.exists()] == []
    finally:
        for t in targets:
            t.unlink(missing_ok=True)
        open_dir.rmdir()


def test_cannot_read_planted_secrets(sandbox: Sandbox, namespaces: None, owner: int) -> None:
    token = "SECRET-" + secrets.token_hex(8)
    folder = Path(tempfile.mkdtemp(prefix="evalsuite-secret-", dir="/tmp"))
    os.chmod(folder, 0o755)
    private, public = folder / "private.txt", folder / "public.txt"
    private.write_text(token)
    os.chmod(private, 0o600)  # the evaluating user's own: readable by its uid, which a user's programs share
    public.write_text(token)
    os.chmod(public, 0o644)  # world-readable: only the minimal root hides it
    for path in (folder, private, public):
        os.chown(path, owner, owner)
    os.environ["EVALSUITE_TEST_SECRET"] = token
    src = (
        "import os, glob\n"
        f"for p in [{str(private)!r}, {str(public)!r}, '/proc/{os.getpid()}/environ', '/proc/1/environ',"
        " '/proc/self/environ']:\n"
        "    try:\n        print(p, open(p, 'rb').read())\n    except OSError as e:\n        print(p, 'denied', e.errno)\n"
        "print(dict(os.environ))\n"
        "for p in glob.glob('/proc/*/environ'):\n"
        "    try:\n        print(open(p, 'rb').read())\n    except OSError:\n        pass\n"
    )
    try:
        r = sandbox.run(Program(src))
    finally:
        del os.environ["EVALSUITE_TEST_SECRET"]
        private.unlink()
        public.unlink()
        folder.rmdir()
    assert r.exit_code == 0, r.stderr
    assert token.encode() not in r.stdout + r.stderr


def test_root_only_file_unreadable_in_every_mode(sandbox: Sandbox) -> None:
    token = secrets.token_hex(8)
    with tempfile.NamedTemporaryFile("w", dir="/tmp", delete=False) as fh:
        fh.write(token)
    os.chmod(fh.name, stat.S_IRUSR)
    try:
        r = sandbox.run(Program(f"print(open({fh.name!r}).read())"))
    finally:
        os.unlink(fh.name)
    assert token.encode() not in r.stdout and r.exit_code != 0
    # refused by the open() itself (unreadable, or absent from the program's root), not by a program that never ran
    assert b"PermissionError" in r.stderr or b"FileNotFoundError" in r.stderr, r.stderr


def test_fork_bomb_is_contained(sandbox: Sandbox, live_programs: Callable[[], list[int]]) -> None:
    src = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(len(live_programs()))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        r = sandbox.run(Program(src))
    finally:
        done.set()
        watcher.join()
    assert r.timed_out or r.cpu_exceeded
    assert max(seen) <= SMALL.processes, f"saw {max(seen)} sandbox processes"


def test_memory_bomb_hits_the_limit(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("xs = []\nwhile True:\n    xs.append(bytearray(10 ** 7))"))
    assert r.memory_error, (r.exit_code, r.stderr)
    assert r.maxrss_kb < SMALL.memory_mb * 1024 * 1.1  # peak RSS also counts shared library pages


def test_infinite_loop_is_stopped(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("while True: pass"))
    assert r.cpu_exceeded and not r.timed_out, r  # its CPU budget stopped it, not a wall-clock limit


def test_sleeping_forever_hits_the_wall_clock(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("import time\ntime.sleep(1000)"))
    assert r.timed_out and r.cpu_s < 1 and not r.cpu_exceeded


def test_killing_the_parent_and_everyone(sandbox: Sandbox, evaluator_pid: int) -> None:
    me = evaluator_pid
    src = (
        "import os, signal\n"
        f"for target in (os.getppid(), {me}, 1):\n"
        "    try:\n        os.kill(target, signal.SIGKILL)\n        print('killed', target, flush=True)\n"
        "    except OSError as e:\n        print('denied', target, e.errno, flush=True)\n"
        "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
        "os.killpg(os.getpgid(0), signal.SIGKILL)\n"
    )
    r = sandbox.run(Program(src))
    # The evaluator is invisible (ESRCH, pid namespace) or out of reach (EPERM, other uid).
    assert f"denied {me} 3".encode() in r.stdout or f"denied {me} 1".encode() in r.stdout, r.stdout
    assert r.setup_error is None and r.exit_code in (0, -9)
    assert sandbox.run(Program("print('still serving')")).stdout == b"still serving\n"


def test_program_runs_in_its_own_session_and_group(
    sandbox: Sandbox, live_programs: Callable[[], list[int]], evaluator_pid: int
) -> None:
    groups: set[tuple[int, int]] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in live_programs():
                try:
                    groups.add((os.getpgid(pid), os.getsid(pid)))
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        sandbox.run(Program("import time\ntime.sleep(1)"))
    finally:
        done.set()
        watcher.join()
    assert groups, "the program was never seen running"
    assert all(pgid != os.getpgid(evaluator_pid) and sid != os.getsid(evaluator_pid) for pgid, sid in groups)


def test_stdout_flood_is_capped(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"))
    assert r.output_exceeded and len(r.stdout) == SMALL.output_bytes
    r = sandbox.run(Program("import sys\nfor _ in range(2000):\n    sys.stderr.write('e' * 65536)"))
    assert len(r.stderr) <= SMALL.stderr_bytes


def test_children_do_not_outlive_the_program(sandbox: Sandbox) -> None:
    src = (
        "import os, subprocess, time\n"
        "subprocess.Popen(['sleep', '60'])\n"  # holds our stdout open
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\n"
        "print('parent done')\n"
    )
    r = sandbox.run(Program(src))
    assert r.exit_code == 0 and b"parent done" in r.stdout
    assert not (r.timed_out or r.starved), r  # the run ended with the program, not when its children let go
    # host_check asserts that no process of the run is left


def test_sys_exit_tricks(sandbox: Sandbox) -> None:
    checker = Checker(sandbox, timeout_s=3.0)
    tests = [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
    assert checker.run("print(4)\nimport sys\nsys.exit(1)", tests, None)[0].outcome == "runtime_error"
    assert checker.run("import os\nos._exit(0)\nprint(4)", tests, None)[0].outcome == "wrong_answer"
    assert (
        checker.run("import atexit\natexit.register(lambda: print('extra'))\nprint(4)", tests, None)[0].outcome
        == "wrong_answer"
    )
    calls = [{"input": "2", "output": "4", "testtype": "functional"}]
    at_import = "import sys\nsys.exit(0)\nclass Solution:\n    def f(self, x): return x * 2\n"
    assert checker.run(at_import, calls, "f")[0].outcome == "runtime_error"
    in_call = "class Solution:\n    def f(self, x):\n        raise SystemExit(0)\n"
    assert checker.run(in_call, calls, "f")[0].outcome == "runtime_error"
    forged = 'class Solution:\n    def f(self, x):\n        print(\'{"i": 0, "ok": "4"}\')\n        return 5\n'
    assert checker.run(forged, calls, "f")[0].outcome == "wrong_answer"


def test_the_evaluating_users_home_is_out_of_reach(sandbox: Sandbox, namespaces: None, home: Path, owner: int) -> None:
    """A secret the user keeps in its home (mode 600, its own uid, which a user's programs share): the program
    can neither read it, list the folder, nor leave a file there; nor reach it through /proc."""
    token = "HOME-SECRET-" + secrets.token_hex(8)
    secret = home / "credentials"
    secret.write_text(token)
    os.chown(secret, owner, owner)
    os.chmod(secret, 0o600)
    before = sorted(p.name for p in home.iterdir())
    src = (
        "import os\n"
        f"for path in ({str(secret)!r}, '/proc/1/root' + {str(secret)!r}, '/proc/self/root' + {str(secret)!r}):\n"
        "    try:\n        print('READ', open(path).read())\n    except OSError as e:\n        print('denied', e.errno)\n"
        f"for folder in ({str(home)!r}, os.path.dirname({str(home)!r})):\n"
        "    try:\n        print('LISTED', os.listdir(folder))\n    except OSError as e:\n        print('denied', e.errno)\n"
        "try:\n"
        f"    open({str(home / 'planted')!r}, 'w').write('x')\n    print('WROTE')\n"
        "except OSError as e:\n    print('denied', e.errno)\n"
    )
    try:
        r = sandbox.run(Program(src))
    finally:
        secret.unlink()
    assert r.exit_code == 0 and b"denied" in r.stdout, (r.stdout, r.stderr[-500:])
    assert token.encode() not in r.stdout + r.stderr
    assert b"credentials" not in r.stdout and home.name.encode() not in r.stdout, r.stdout  # no listing of home
    assert b"WROTE" not in r.stdout, r.stdout
    assert sorted(p.name for p in home.iterdir()) == [n for n in before if n != "credentials"]


def test_only_its_own_processes_are_visible(sandbox: Sandbox, namespaces: None, evaluator_pid: int) -> None:
    """/proc shows the run's own processes (its init and itself), never the evaluator or anything else."""
    src = (
        "import os\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\nprint(pids)\n"
        "for p in pids:\n    print(p, open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ')[:200])\n"
    )
    r = sandbox.run(Program(src))
    assert r.exit_code == 0, r.stderr[-500:]
    assert r.stdout.splitlines()[0] == b"[1, 2]", r.stdout  # init and the program
    assert f"/proc/{evaluator_pid}/".encode() not in r.stdout and b"pytest" not in r.stdout


def test_nothing_is_left_for_the_next_program(sandbox: Sandbox) -> None:
    """Whatever one program writes wherever it may (its scratch, its home, shared memory, its box), the next
    program finds none of it."""
    places = ["mark", "/tmp/mark", os.path.join("~", "mark"), "/dev/shm/mark", "/var/tmp/mark", "/box/mark"]
    write = (
        "import os\n"
        f"for place in {places!r}:\n"
        "    try:\n        open(os.path.expanduser(place), 'w').write('left')\n        print('wrote', place)\n"
        "    except OSError as e:\n        print('denied', place, e.errno)\n"
    )
    look = f"import os\nprint([p for p in {places!r} if os.path.exists(os.path.expanduser(p))])\n"
    wrote = sandbox.run(Program(write))
    assert wrote.exit_code == 0 and b"wrote mark" in wrote.stdout, (wrote.stdout, wrote.stderr[-300:])
    found = sandbox.run(Program(look))
    assert found.stdout == b"[]\n", found.stdout


def test_no_user_namespace_inside_a_users_sandbox(sandbox: Sandbox, owner: int) -> None:
    """In a user's sandbox the program could otherwise make a user namespace of its own and hold every capability
    there; its run forbids them."""
    if owner == 0:
        pytest.skip("root's programs run in the host's user namespace, where the host's own setting decides")
    src = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.unshare(0x10000000), ctypes.get_errno())"
    r = sandbox.run(Program(src))
    assert r.stdout.split()[0] == b"-1", r.stdout  # refused (ENOSPC: none may be made below the run's)
