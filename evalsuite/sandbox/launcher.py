"""Privileged half of one sandboxed execution; run as its own interpreter, never imported.

The executor starts this file as `python -I -S launcher.py` (the configuration in
EVALSUITE_LAUNCH, an environment only root can read) with real
pipes and a status pipe.  Three processes:

- the launcher enters fresh namespaces when asked (for a user other than
  root, first a user namespace that maps only that user's own uid and gid,
  which gives it the right to build the rest), forks `init`, kills it at
  the backstop, and reports the wall time and whether the backstop fired;
- `init` (pid 1 of the new pid namespace) joins the run's memory cgroup,
  builds the minimal read-only root, forks the program, reaps everything,
  and reports the program's real wait status and rusage.  The program is
  never pid 1, so the kernel treats its signals (abort() is SIGABRT) like
  anywhere else.  In a user namespace init also forbids further user
  namespaces inside it, so the program cannot gain capabilities anywhere;
- the program applies rlimits, gets a fresh session keyring, drops to the
  slot's unprivileged uid (root) or keeps the user's own uid with no
  capabilities (a user namespace), sets no_new_privs, and execs the
  interpreter.

After the program ends, init clears the slot uid's persistent user keyrings
(root; a user namespace has user keyrings of its own, gone with it).

This file only uses the standard library because it runs before anything else
and outside the package's virtual environment.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import signal
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
ST_NODEV, ST_NOEXEC = 4, 8  # statvfs flags a user namespace may not clear on a mount it inherited
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = 155  # x86_64; see _pivot_root for other machines
SETUP_FAILED = 121  # exit code of the child when the sandbox could not be built
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219}
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR = 1, 7
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5

_libc = ctypes.CDLL(None, use_errno=True)
_KEYCTL_NR = SYS_KEYCTL.get(platform.machine(), 250)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _pivot_root(new_root: str) -> None:
    """Make `new_root` the root and detach the old one (the `pivot_root(".", ".")` idiom)."""
    number = {"x86_64": 155, "aarch64": 41, "arm64": 41}.get(platform.machine(), SYS_PIVOT_ROOT)
    os.chdir(new_root)
    _check(_libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def _bind(root: str, path: str, writable: bool = False) -> None:
    """Mirror host `path` read-only at the same place under `root` (symlinks are copied as links)."""
    target = root + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(path), target)
        return
    if not os.path.exists(path):
        return
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(path, target, None, MS_BIND | MS_REC)
    if not writable:
        _read_only(target)


def _read_only(target: str, extra: int = 0) -> None:
    """Remount a bind read-only and nosuid, keeping the nodev/noexec it came with (a user namespace must)."""
    kept = os.statvfs(target).f_flag & (ST_NODEV | ST_NOEXEC)  # the same bits as MS_NODEV and MS_NOEXEC
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | extra | kept)


def _build_root(cfg: dict) -> None:
    """Minimal filesystem: read-only system dirs and interpreter, the job box, a private /tmp."""
    root, lim = cfg["root"], cfg["limits"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for path in cfg["binds"]:
        _bind(root, path)
    for dev in ("null", "zero", "random", "urandom"):
        _bind(root, f"/dev/{dev}", writable=True)
    os.makedirs(root + "/box")
    _mount(cfg["box"], root + "/box", None, MS_BIND)
    _read_only(root + "/box", MS_NODEV)
    for name, host in cfg.get("vendor", []):  # vetted packages, read-only
        target = f"{root}/vendor/{name}"
        if os.path.isdir(host):
            os.makedirs(target)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount(host, target, None, MS_BIND | MS_REC)
        _read_only(target, MS_NODEV)
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(root + "/tmp")
    scratch = f"size={lim['scratch_mb']}m,mode=700,uid={cfg['uid']},gid={cfg['gid']}"
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    _pivot_root(root)


def _apply_limits(lim: dict, address_space: bool, helpers: int) -> None:
    """rlimits of the program; `helpers` processes of the run's (launcher, init) count against RLIMIT_NPROC too."""
    cpu = int(lim["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if address_space:
        mem = int(lim["memory_mb"]) << 20
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    fsize = int(lim["file_size_mb"]) << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["open_files"], lim["open_files"]))
    nproc = lim["processes"] + helpers
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Deep recursion through C frames (lru_cache, sorted keys) needs a large stack; its pages still count
    # against the memory limit, so it may be as large as that limit.
    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    stack = int(lim["memory_mb"]) << 20
    stack = stack if hard == resource.RLIM_INFINITY else min(stack, hard)
    resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))


def _keyctl(*args: int) -> int:
    """keyctl(2); its number is looked up before privileges drop (the stdlib may be unreadable after)."""
    return _libc.syscall(ctypes.c_long(_KEYCTL_NR), *(ctypes.c_long(a) for a in args))


def _fresh_keyrings() -> None:
    """Empty the uid's persistent user keyrings and join a new session keyring (where keys are allowed at all)."""
    _keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)
    _keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)
    _keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)


def _drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError(f"could not drop to uid {uid} / gid {gid}")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _report(fd: int, record: dict) -> None:
    os.write(fd, (json.dumps(record) + "\n").encode())


def _program(cfg: dict, status_fd: int) -> None:
    """The forked program process; never returns."""
    try:
        if cfg["isolation"] == "namespaces":
            os.chdir("/tmp")
        else:
            os.chdir(cfg["workdir"])
        for fd in cfg.get("keep_fds", []):
            os.set_inheritable(fd, True)
        try:
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("0")
        except OSError:
            pass
        # In a user namespace the launcher and init share the program's uid, hence its RLIMIT_NPROC count.
        _apply_limits(cfg["limits"], address_space=not cfg.get("cgroup_procs"), helpers=2 if cfg.get("userns") else 0)
        if cfg["drop"]:
            _drop_privileges(cfg["uid"], cfg["gid"])
            if not cfg.get("keep_keys"):
                _fresh_keyrings()
        elif cfg.get("userns"):  # the user's own uid: its capabilities end at exec, as for any non-root uid
            _keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)
            _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        os.close(status_fd)
        os.execve(cfg["argv"][0], cfg["argv"], cfg["env"])
    except BaseException as exc:  # noqa: BLE001 - anything here means the sandbox was not built
        try:
            _report(status_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
        finally:
            os._exit(SETUP_FAILED)


def _init(cfg: dict, status_fd: int) -> None:
    """Root helper between the launcher and the program: cgroup, root filesystem, fork, reap, report."""
    try:
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        if cfg.get("cgroup_procs"):
            with open(cfg["cgroup_procs"], "w") as fh:
                fh.write("0")
        try:
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("-1000")  # the OOM killer picks the program, never its reaper
        except OSError:
            pass
        if cfg["isolation"] == "namespaces":
            _build_root(cfg)
        if cfg.get("userns"):
            _no_more_user_namespaces()
    except BaseException as exc:  # noqa: BLE001
        _report(status_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
        os._exit(SETUP_FAILED)
    pid = os.fork()
    if pid == 0:
        _program(cfg, status_fd)
    for fd in cfg.get("keep_fds", []):
        os.close(fd)
    while True:
        try:
            done, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            os._exit(SETUP_FAILED)
        if done == pid:
            break
    if cfg["drop"] and not cfg.get("keep_keys"):
        _clear_user_keyrings(cfg["uid"], cfg["gid"])
    _report(
        status_fd,
        {
            "exit": os.waitstatus_to_exitcode(status),
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": usage.ru_maxrss,
        },
    )
    os._exit(0)


def _clear_user_keyrings(uid: int, gid: int) -> None:
    """Keys a program left in its uid's user keyrings outlive it; empty them as that uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            _keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)
            _keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _own_user_namespace() -> None:
    """Enter a new user namespace in which the caller's uid and gid are the only ones, mapped to themselves.

    The caller keeps its identity (files it creates are its own) and gains
    capabilities inside the namespace only, which is what building the rest
    of the sandbox needs; the program loses them when it execs.
    """
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _no_more_user_namespaces() -> None:
    """Forbid user namespaces below this one, so the program cannot gain capabilities in one of its own."""
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")


def main() -> None:
    cfg = json.loads(os.environ.pop("EVALSUITE_LAUNCH"))  # not argv: every uid can read command lines
    status_fd = int(cfg["status_fd"])
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if os.getppid() == 1:  # the executor died before we got here
        os._exit(1)
    if cfg["isolation"] == "namespaces":
        flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
        try:
            if cfg.get("userns"):
                _own_user_namespace()
            _check(_libc.unshare(flags), "unshare")
        except OSError as exc:
            _report(status_fd, {"setup_error": str(exc)})
            os._exit(SETUP_FAILED)
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _init(cfg, status_fd)
    for fd in cfg.get("keep_fds", []):
        os.close(fd)
    timed_out = False

    def on_alarm(signum: int, frame: object) -> None:
        nonlocal timed_out
        timed_out = True
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # init ended between the alarm and this handler: nothing left to stop
            pass

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(cfg["limits"]["backstop_s"]))
    os.waitpid(pid, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    _report(status_fd, {"wall_s": time.monotonic() - started, "timed_out": timed_out})
    os._exit(0)


if __name__ == "__main__":
    main()
