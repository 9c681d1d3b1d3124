"""The executor's contract: pipes, exit codes, limits, clean environment, scratch folder, pool order."""

from __future__ import annotations

import os
from dataclasses import replace

from sandbox_helpers import SMALL

from evalsuite.sandbox import Limits, Program, Sandbox


def test_stdin_roundtrip_large_input(sandbox: Sandbox) -> None:
    data = b"".join(b"%d\n" % i for i in range(200_000))  # ~1.3 MB, more than a pipe buffer
    r = sandbox.run(
        Program("import sys\nxs = sys.stdin.buffer.read().split()\nprint(len(xs), sum(map(int, xs)))", stdin=data)
    )
    assert r.exit_code == 0, r.stderr
    assert r.stdout.split() == [b"200000", str(sum(range(200_000))).encode()]


def test_iterating_stdin_and_main_guard(sandbox: Sandbox) -> None:
    src = "import sys\ndef main():\n    for line in sys.stdin:\n        print(line.strip()[::-1])\nif __name__ == '__main__':\n    main()\n"
    r = sandbox.run(Program(src, stdin=b"abc\nxyz\n"))
    assert r.stdout == b"cba\nzyx\n"


def test_exit_codes_and_stderr(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("import sys\nprint('out')\nsys.exit(3)"))
    assert (r.exit_code, r.stdout) == (3, b"out\n")
    r = sandbox.run(Program("raise ValueError('boom')"))
    assert r.exit_code == 1 and b"ValueError: boom" in r.stderr
    r = sandbox.run(Program("exit()"))  # site is off; the runner provides exit()
    assert r.exit_code == 0


def test_runs_unprivileged_with_clean_environment(sandbox: Sandbox) -> None:
    os.environ["EVALSUITE_PARENT_ONLY"] = "leak"
    try:
        r = sandbox.run(
            Program("import os\nprint(os.getuid(), os.getgid(), os.getgroups())\nprint(sorted(os.environ))")
        )
    finally:
        del os.environ["EVALSUITE_PARENT_ONLY"]
    uid_line, env_line = r.stdout.decode().splitlines()
    uid, gid, groups = uid_line.split(" ", 2)
    assert int(uid) >= 1000 and int(gid) >= 1000 and groups == "[]"
    assert "EVALSUITE_PARENT_ONLY" not in env_line and "PATH" in env_line


def test_scratch_is_writable_and_private(sandbox: Sandbox) -> None:
    src = "import os\nopen('f.txt','w').write('hi')\nprint(os.getcwd(), open('f.txt').read(), oct(os.stat('.').st_mode & 0o777))"
    r = sandbox.run(Program(src))
    assert r.exit_code == 0, r.stderr
    cwd, text, mode = r.stdout.decode().split()
    assert text == "hi" and mode == "0o700"
    assert not os.path.exists(os.path.join(cwd, "f.txt")) or sandbox.isolation == "namespaces"


def test_cpu_limit_kills_busy_loop(sandbox: Sandbox) -> None:
    """The CPU budget decides, not the wall clock: a generous wall backstop never fires first."""
    r = sandbox.run(Program("while True: pass"), replace(SMALL, wall_s=60.0, cpu_s=1.0))
    assert r.cpu_exceeded and not r.timed_out
    assert 1.0 <= r.cpu_s < 1.5


def test_cpu_limit_counts_every_process_of_the_run(sandbox: Sandbox) -> None:
    """Children spinning in parallel spend the run's one budget (each alone stays under RLIMIT_CPU)."""
    src = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        break\nwhile True: pass\n"
    r = sandbox.run(Program(src), replace(SMALL, wall_s=60.0, cpu_s=1.5))
    assert r.cpu_exceeded and not r.timed_out


def test_sleeping_is_stopped_by_the_wall_backstop(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("import time\ntime.sleep(60)"), replace(SMALL, cpu_s=1.0, wall_s=None))
    assert r.timed_out and not r.cpu_exceeded
    assert r.wall_s < replace(SMALL, cpu_s=1.0, wall_s=None).effective_wall_s + 1


def test_file_size_limit(sandbox: Sandbox) -> None:
    r = sandbox.run(Program("open('big','wb').write(b'x' * (3 << 20))"))
    assert r.exit_code != 0  # SIGXFSZ or OSError(EFBIG)


def test_process_limit_stops_threads(sandbox: Sandbox) -> None:
    src = (
        "import threading, time\nn = 0\ntry:\n    for _ in range(50):\n"
        "        threading.Thread(target=time.sleep, args=(1,), daemon=True).start()\n        n += 1\n"
        "except RuntimeError:\n    pass\nprint(n)"
    )
    r = sandbox.run(Program(src))
    assert r.exit_code == 0, r.stderr
    assert int(r.stdout) < SMALL.processes


def test_open_files_limit(sandbox: Sandbox) -> None:
    src = (
        "fs = []\ntry:\n    while True: fs.append(open('/dev/null'))\nexcept OSError as e:\n    print(len(fs), e.errno)"
    )
    r = sandbox.run(Program(src))
    count, errno = map(int, r.stdout.split())
    assert count < SMALL.open_files and errno == 24


def test_functional_calls_results_and_prints(sandbox: Sandbox) -> None:
    src = "class Solution:\n    def f(self, xs: List[int], k: int) -> List[int]:\n        print('debug')\n        return tuple(x * k for x in xs)\n"
    r = sandbox.run(Program(src, mode="functional", fn_name="f", calls=(("[1, 2]", "3"), ("[]", "1"))))
    assert [c["ok"] for c in r.calls] == [[3, 6], []]
    assert r.stdout == b"" and r.stderr.count(b"debug") == 2


def test_a_program_may_use_all_its_processes(sandbox: Sandbox) -> None:
    """`processes` is the program's own: whatever the sandbox itself runs under the same uid is not taken from it."""
    src = (
        "import os, sys\nr, w = os.pipe()\nkids = []\n"
        f"for _ in range({SMALL.processes - 1}):\n"
        "    pid = os.fork()\n    if pid == 0:\n        os.close(w)\n        os.read(r, 1)\n        os._exit(0)\n"
        "    kids.append(pid)\n"
        "os.close(w)\nprint(len([os.waitpid(k, 0) for k in kids]))\n"
    )
    r = sandbox.run(Program(src))
    assert (r.exit_code, r.stdout) == (0, b"%d\n" % (SMALL.processes - 1)), r.stderr[-300:]


def test_map_keeps_input_order(sandbox: Sandbox) -> None:
    programs = [Program(f"import time\ntime.sleep(0.5)\nprint({i})") for i in range(4)]
    results = sandbox.map(programs, workers=2)
    assert [r.stdout for r in results] == [b"%d\n" % i for i in range(4)]


def test_describe_names_network_protection(sandbox: Sandbox, owner: int) -> None:
    info = sandbox.describe()
    assert info["isolation"] in ("namespaces", "uid")
    assert info["network"] in ("network namespace (no interfaces up)", "audit hook")
    # root runs programs under uids of their own; a user under its own uid, in a user namespace of the run's
    assert (info["unprivileged_uid"], info["user_namespace"]) == ((True, False) if owner == 0 else (False, True))


def test_limits_are_validated() -> None:
    import pytest

    with pytest.raises(ValueError, match="processes"):
        Limits(processes=1)
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)


def test_uid_fallback_still_drops_privileges_and_blocks_sockets(isolation: str) -> None:
    """Without namespaces (an unprivileged container), the uid drop and the socket audit hook still hold."""
    fallback = Sandbox(limits=SMALL, isolation="uid")
    r = fallback.run(Program("import os\nprint(os.getuid())\nimport socket\nsocket.socket()"))
    assert int(r.stdout) >= 1000
    assert b"network access is disabled" in r.stderr
    assert fallback.describe()["network"] == "audit hook"


def test_deep_recursion_through_c_frames_has_stack(sandbox: Sandbox) -> None:
    """lru_cache recursion uses the C stack: 8 MiB segfaults near depth 20,000, as accepted solutions go deeper."""
    src = (
        "import sys\nfrom functools import lru_cache\nsys.setrecursionlimit(10 ** 6)\n"
        "@lru_cache(None)\ndef f(n):\n    return 0 if n == 0 else f(n - 1) + 1\nprint(f(60000))\n"
    )
    r = sandbox.run(Program(src), replace(SMALL, cpu_s=5.0, wall_s=20.0))
    assert (r.exit_code, r.stdout) == (0, b"60000\n"), (r.signal_name, r.stderr[-300:])
