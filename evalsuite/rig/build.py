"""Build `llama-server` from the llama.cpp sources vendored in a pinned PyPI sdist.

The reference rig must run the same server software users run, on a machine
with no internet except package registries.  The `llama-cpp-python` sdist
vendors llama.cpp (with its vocab-only GGUF files and the `gguf-py` writer), so
one `pip download` of that sdist is the only network access; everything else
is a local CPU-only CMake build into a per-user cache folder keyed by the
sdist version and the llama.cpp commit, reused while its binary still runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from evalsuite.rig.errors import RigError
from evalsuite.rig.fetch import pip_fetch

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
LLAMA_CPP_COMMIT = "0c1e570"
"""The llama.cpp commit that sdist vendors; `llama-server --version` must report it."""

CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_NUMBER=1",
    f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT}",
)
"""CPU only, static (the binary is copied out of the build tree), nothing fetched at configure time.

The sdist carries no git metadata, so the commit is stamped explicitly: `--version`
and `/props` then report `b1-0c1e570` instead of "unknown"."""

BUILD_JOBS = 2
Progress = Callable[[str], None]


def cache_root() -> Path:
    """`$EVALSUITE_CACHE`, else `$XDG_CACHE_HOME/evalsuite`, else `~/.cache/evalsuite`."""
    if os.environ.get("EVALSUITE_CACHE"):
        return Path(os.environ["EVALSUITE_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "evalsuite"
    return Path.home() / ".cache" / "evalsuite"


@dataclass(frozen=True)
class RigPaths:
    """Where one pinned llama.cpp version lives in the cache."""

    home: Path

    @property
    def src(self) -> Path:
        """The extracted `vendor/llama.cpp` tree (kept: its vocab files and gguf-py feed the model generator)."""
        return self.home / "src"

    @property
    def build_dir(self) -> Path:
        return self.home / "build"

    @property
    def binary(self) -> Path:
        return self.home / "bin" / "llama-server"

    @property
    def vocab_dir(self) -> Path:
        return self.src / "models"

    @property
    def gguf_py(self) -> Path:
        return self.src / "gguf-py"

    @property
    def models_dir(self) -> Path:
        """Generated rig models (deterministic, rebuilt when missing)."""
        return self.home / "models"

    @property
    def build_log(self) -> Path:
        return self.home / "build.log"


def rig_paths() -> RigPaths:
    """The cache folder of the pinned version, e.g. `~/.cache/evalsuite/llama-server/0.3.36-0c1e570`."""
    return RigPaths(cache_root() / "llama-server" / f"{SDIST_VERSION}-{LLAMA_CPP_COMMIT}")


@contextlib.contextmanager
def file_lock(path: Path, progress: Progress) -> Iterator[None]:
    """An exclusive advisory lock: a second build (another shell, a parallel test run) waits here."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"Another process is building the rig in {path.parent}; waiting for it to finish.")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def server_version(binary: Path, timeout: float = 30.0) -> str | None:
    """The `--version` text of a llama-server binary, or None when it does not run here.

    A cache restored onto another CPU can hold a binary built for instructions
    this CPU lacks; running it is the only reliable check.
    """
    if not binary.is_file() or not os.access(binary, os.X_OK):
        return None
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or LLAMA_CPP_COMMIT not in text:
        return None
    return text


def _download_sdist(dest: Path, progress: Progress) -> Path:
    """The sdist tarball: `$EVALSUITE_LLAMA_SDIST` if set (offline machines, CI caches), else `pip download`."""
    return pip_fetch(
        SDIST_PACKAGE,
        SDIST_VERSION,
        dest,
        form="sdist",
        env_var="EVALSUITE_LLAMA_SDIST",
        what="source distribution (about 75 MB)",
        progress=progress,
    )


def _extract_vendor(sdist: Path, dest: Path, progress: Progress) -> None:
    """Extract only `vendor/llama.cpp/` of the sdist into `dest` (atomically, via a sibling folder)."""
    progress(f"Extracting llama.cpp sources from {sdist.name}.")
    prefix = f"{SDIST_PACKAGE.replace('-', '_')}-{SDIST_VERSION}/vendor/llama.cpp/"
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(sdist, "r:gz") as tar:
        members = []
        for member in tar.getmembers():
            if not member.name.startswith(prefix):
                continue
            member.name = member.name[len(prefix) :]
            if member.name and not member.name.startswith(".git"):
                members.append(member)
        if not members:
            raise RigError(f"{sdist} has no {prefix} folder; is it the {SDIST_PACKAGE} {SDIST_VERSION} sdist?")
        tar.extractall(staging, members=members, filter="data")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)


def ensure_source(progress: Progress = print) -> RigPaths:
    """The cache folder with the extracted llama.cpp tree, downloading the sdist if needed."""
    paths = rig_paths()
    if (paths.src / "CMakeLists.txt").is_file():
        return paths
    with file_lock(paths.home / ".lock", progress):
        if not (paths.src / "CMakeLists.txt").is_file():
            with tempfile.TemporaryDirectory(prefix="evalsuite-sdist-") as tmp:
                _extract_vendor(_download_sdist(Path(tmp), progress), paths.src, progress)
    return paths


def run_logged(cmd: list[str], log: Path, progress: Progress, what: str) -> None:
    """Run a rig step, appending its output to the log (echoing ninja's [k/n] progress every ~10 %); RigError with
    the log's last lines when it fails."""
    step = re.compile(rb"^\[(\d+)/(\d+)\]")
    next_report = 0.1
    with log.open("ab") as fh:
        fh.write(("$ " + " ".join(cmd) + "\n").encode())
        fh.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            match = step.match(line)
            if match and int(match[2]) > 0 and int(match[1]) / int(match[2]) >= next_report:
                progress(f"  {what}: {match[1].decode()}/{match[2].decode()} steps")
                next_report = int(match[1]) / int(match[2]) + 0.1
        code = proc.wait()
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RigError(f"{what} failed (exit {code}); full log in {log}. Last lines:\n{tail}")


def _generator_flags() -> list[str]:
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def ensure_llama_server(progress: Progress = print) -> Path:
    """The path of a built, runnable `llama-server`, building it on first use (10-15 minutes on 2 cores)."""
    paths = rig_paths()
    if server_version(paths.binary):
        return paths.binary
    if shutil.which("cmake") is None:
        raise RigError(
            "Building llama-server needs cmake and a C++ compiler; install them (e.g. apt-get install cmake g++)."
        )
    paths = ensure_source(progress)
    with file_lock(paths.home / ".lock", progress):
        if server_version(paths.binary):
            return paths.binary
        progress(
            f"Building llama-server (llama.cpp {LLAMA_CPP_COMMIT}, CPU only) into {paths.home}. "
            f"The first build takes 10-15 minutes on 2 cores (about 21 CPU-minutes); later runs reuse it."
        )
        started = time.monotonic()
        paths.build_log.write_text("")
        configure = ["cmake", "-S", str(paths.src), "-B", str(paths.build_dir), *_generator_flags(), *CMAKE_FLAGS]
        run_logged(configure, paths.build_log, progress, "cmake configure")
        build = ["cmake", "--build", str(paths.build_dir), "--target", "llama-server", f"-j{BUILD_JOBS}"]
        run_logged(build, paths.build_log, progress, "cmake build")
        built = paths.build_dir / "bin" / "llama-server"
        if not built.is_file():
            raise RigError(f"The build finished but {built} is missing; see {paths.build_log}.")
        paths.binary.parent.mkdir(parents=True, exist_ok=True)
        staged = paths.binary.with_name("llama-server.partial")
        shutil.copy2(built, staged)
        staged.rename(paths.binary)
        version = server_version(paths.binary)
        if version is None:
            raise RigError(f"The freshly built {paths.binary} does not run `--version`; see {paths.build_log}.")
        shutil.rmtree(paths.build_dir, ignore_errors=True)
        progress(f"Built llama-server in {time.monotonic() - started:.0f} s: {paths.binary}")
    return paths.binary
