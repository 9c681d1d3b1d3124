"""What a program may see of the host: vetted packages in, the evaluator's own files out.

Vetted packages (numpy, sortedcontainers: what LiveCodeBench's own harness
lets solutions import) come from the evaluator's environment, read-only: in
the `namespaces` level each package folder is mounted read-only under
/vendor; in the `uid` level the program imports it from where it is, through
a finder that serves only those names, and only if the sandbox uid can reach
it.  Compiled packages are offered only when the sandbox runs the same
interpreter as the evaluator.

Sealing (the `uid` level, where programs share the host's filesystem and
/proc): the folders the evaluator works in (its current folder, the project
holding this package, and every folder of a file it has open, such as a run
store's records.sqlite) lose their permissions for "others", which is what
sandbox uids are.  A program that reads the evaluator's command line in
/proc therefore learns paths it cannot open.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from functools import cache
from pathlib import Path

VETTED = ("numpy", "sortedcontainers")
THREAD_ENV = {
    name: "1"
    for name in (
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "GOTO_NUM_THREADS",
    )
}
_SYSTEM = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/var", "/run", "/boot")


@cache
def vetted_packages(python: str) -> tuple[tuple[str, str], ...]:
    """(name, host folder or file) of each vetted package importable here and usable by `python`."""
    same_interpreter = os.path.realpath(python) == os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    out: list[tuple[str, str]] = []
    for name in VETTED:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None:
            continue
        location = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        compiled = any(p.suffix == ".so" for p in location.rglob("*.so")) if location.is_dir() else False
        if compiled and not same_interpreter:
            continue
        out.append((name, str(location)))
        libs = location.with_name(f"{name}.libs")
        if libs.is_dir():
            out.append((f"{name}.libs", str(libs)))
    return tuple(out)


def reachable_by_others(path: str) -> bool:
    """Whether a user who is neither owner nor group member can read `path` (x on every folder above it)."""
    real = Path(os.path.realpath(path))
    try:
        for part in reversed(real.parents):
            if not part.stat().st_mode & 0o001:
                return False
        return bool(real.stat().st_mode & 0o004)
    except OSError:
        return False


def _evaluator_dirs() -> set[Path]:
    """Folders the evaluator works in: its current folder, the project holding this package, open files' folders."""
    dirs: set[Path] = set()
    try:
        dirs.add(Path(os.getcwd()).resolve())
    except OSError:
        pass
    package = Path(__file__).resolve().parents[1]
    if "site-packages" not in package.parts and "dist-packages" not in package.parts:
        dirs.add(package.parent)
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/") and os.path.isfile(target):
                dirs.add(Path(target).parent)
    except OSError:
        pass
    return dirs


def _sealable(path: Path, python: str) -> bool:
    """Ours and not shared: never a system folder, a top-level folder, a shared /tmp or the sandbox's interpreter."""
    text = str(path)
    if len(path.parts) <= 2 or any(text == s or text.startswith(s + "/") for s in _SYSTEM):
        return False
    needed = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.realpath(python))}
    if any(text == p or p.startswith(text + "/") for p in needed):
        return False  # the interpreter (and what it imports) must stay reachable
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_ISVTX | 0o002)


def seal_evaluator_files(python: str) -> list[str]:
    """Remove "others" permissions from the evaluator's folders (see module doc); returns those changed."""
    sealed = []
    for folder in sorted(_evaluator_dirs()):
        if not _sealable(folder, python):
            continue
        mode = folder.stat().st_mode & 0o7777
        if mode & 0o007:
            os.chmod(folder, mode & ~0o007)
            sealed.append(str(folder))
    return sealed
