"""Serves sandbox runs, as the unprivileged user this process runs as, to the root test process that started it.

Started by `as_user.UserSandbox` with the sandbox setting and limits as
arguments (`--no-userns` first: refuse this process tree user namespaces with
a seccomp filter, as container runtimes do).  Answers one JSON line per
request line on stdin; the first line out says which sandbox it built, or
why none could be built.  Values in call records travel as the runner's
tagged JSON, so nothing here is unpickled by root.
"""

from __future__ import annotations

import base64
import ctypes
import dataclasses
import json
import os
import platform
import struct
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_lock = threading.Lock()


def send(record: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def refuse_user_namespaces() -> None:
    """A seccomp filter: unshare/clone with CLONE_NEWUSER fail with EPERM, clone3 with ENOSYS (so callers use clone)."""
    if platform.machine() != "x86_64":
        raise OSError("the test's seccomp filter knows x86_64 system call numbers only")
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    program = [
        (ld, 0, 0, 4),  # arch
        (jeq, 0, 8, 0xC000003E),  # AUDIT_ARCH_X86_64, else allow
        (ld, 0, 0, 0),  # system call number
        (jeq, 3, 0, 272),  # unshare -> look at the flags
        (jeq, 2, 0, 56),  # clone -> look at the flags
        (jeq, 0, 4, 435),  # clone3 -> ENOSYS, else allow
        (ret, 0, 0, enosys),
        (ld, 0, 0, 16),  # low word of the first argument: the flags
        (jset, 0, 1, 0x10000000),  # CLONE_NEWUSER
        (ret, 0, 0, eperm),
        (ret, 0, 0, allow),
    ]
    code = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(code)
    fprog = struct.pack("HL", len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


def encode_result(result: Any) -> dict[str, Any]:
    from evalsuite.sandbox.runner import encode

    out = dataclasses.asdict(result)
    out["stdout"] = base64.b64encode(result.stdout).decode()
    out["stderr"] = base64.b64encode(result.stderr).decode()
    out["calls"] = encode(result.calls)
    return out


def main() -> None:
    args = sys.argv[1:]
    if args[0] == "--no-userns":
        refuse_user_namespaces()
        args = args[1:]
    from evalsuite.sandbox import Limits, Program, Sandbox
    from evalsuite.sandbox.levels import requested

    setting, limits = args[0], Limits(**json.loads(args[1]))
    try:
        with requested(setting):
            sandbox = Sandbox(limits=limits)
    except Exception as exc:  # noqa: BLE001 - reported to the test, which decides
        send({"ready": False, "error": type(exc).__name__, "message": str(exc)})
        return
    send({"ready": True, "describe": sandbox.describe()})

    def handle(request: dict[str, Any]) -> None:
        try:
            given = request["program"]
            program = Program(
                source=given["source"],
                mode=given["mode"],
                stdin=base64.b64decode(given["stdin"]),
                fn_name=given["fn_name"],
                calls=tuple(tuple(c) for c in given["calls"]),
                result_caps=tuple(given["result_caps"]),
            )
            run_limits = Limits(**request["limits"]) if request.get("limits") else None
            send({"id": request["id"], "result": encode_result(sandbox.run(program, run_limits))})
        except Exception as exc:  # noqa: BLE001 - the test sees it as a failure of the run
            send({"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})

    with ThreadPoolExecutor(max_workers=4) as pool:
        for line in sys.stdin:
            pool.submit(handle, json.loads(line))


if __name__ == "__main__":
    main()
