"""Which isolation level a sandbox gets: the best this machine allows, or the one asked for; never less unasked.

The setting (`--sandbox`, `[defaults] sandbox`, `requested(...)` in code):

- `auto` (the default): the best level available (`namespaces`, else `uid`
  for root); where there is none (a user other than root whose kernel
  refuses user namespaces) model-written code is refused, with the reason
  and the ways out;
- `namespaces` or `uid`: that level, refused where it is unavailable;
- `none`: no isolation, on purpose: programs run as the evaluating user,
  with its files and network.  The level is recorded with every grade.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, cast, get_args

from evalsuite.sandbox.isolation import Isolation, probe_isolation

PROTECTS: dict[str, dict[str, str]] = {
    "namespaces": {
        "files": "a minimal read-only root (system libraries, the interpreter, vetted packages) and a private /tmp; "
        "no home, project or run store",
        "processes": "a pid namespace of the run's own: no other process is visible",
    },
    "uid": {
        "files": "the host's files as an unprivileged other user: root-only files and the evaluator's sealed "
        "folders are out of reach, world-readable files are not",
        "processes": "the host's /proc: other processes' command lines are visible, their files and environment not",
    },
    "none": {
        "files": "everything the evaluating user may read and write",
        "processes": "the evaluating user's: its processes can be seen and signalled",
    },
}
"""What each level keeps a program from, in `describe()` and `evalsuite sandbox`."""

Setting = Literal["auto", "namespaces", "uid", "none"]
SETTINGS: tuple[str, ...] = get_args(Setting)
_setting: ContextVar[Setting] = ContextVar("evalsuite_sandbox_setting", default="auto")

_OPT_OUT = (
    'accept the risk with `--sandbox none` (or `sandbox = "none"` under [defaults] in evalsuite.toml), which runs '
    "the programs as you, with your files and network"
)


class SandboxRefused(RuntimeError):
    """The isolation asked for (by default: any) is not available here; the message says why and what to do."""


def check_setting(value: object) -> Setting:
    """`value` as a setting, or ValueError naming the accepted ones."""
    if value not in SETTINGS:
        raise ValueError(f"The sandbox setting must be one of {', '.join(SETTINGS)}; got {value!r}.")
    return cast(Setting, value)


def current_setting() -> Setting:
    """The setting in force here (`auto` unless `requested` says otherwise)."""
    return _setting.get()


@contextmanager
def requested(setting: str) -> Iterator[None]:
    """Sandboxes built inside this block (in this thread or task) follow `setting`."""
    token = _setting.set(check_setting(setting))
    try:
        yield
    finally:
        _setting.reset(token)


def available() -> list[Isolation]:
    """The levels this user may have on this machine, best first (`none` is always possible, if asked for)."""
    best, _ = probe_isolation()
    levels: list[Isolation] = ["namespaces"] if best == "namespaces" else []
    if os.geteuid() == 0:
        levels.append("uid")
    return [*levels, "none"]


def choose(setting: str) -> Isolation:
    """The level for `setting`, or SandboxRefused saying why it cannot be had and what would give it."""
    setting = check_setting(setting)
    levels = available()
    if setting == "auto":
        if levels[0] == "none":
            raise SandboxRefused(refusal())
        return levels[0]
    if setting in levels:
        return setting
    if setting == "uid":
        why = "it needs root (programs run under uids of their own)"
    else:
        why = f"the kernel refused to build it ({probe_isolation()[1]})"
    raise SandboxRefused(
        f"The sandbox level '{setting}' was asked for, but {why}; this machine gives this user "
        f"{' or '.join(repr(level) for level in levels)}. Ask for one of those (`--sandbox auto` picks the best)."
    )


def refusal() -> str:
    """Why model-written code is not run here, and the ways out."""
    return (
        f"Model-written code was not run: this user (uid {os.geteuid()}) is not root and the kernel refused it a "
        f"user namespace ({probe_isolation()[1]}), so nothing would keep the programs from your files, your network "
        "or your processes. Ways out: allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1` "
        "where that setting exists, `user.max_user_namespaces` above 0, and on Ubuntu 24.04 "
        "`kernel.apparmor_restrict_unprivileged_userns=0`); run evalsuite as root, for example in a container; or "
        f"{_OPT_OUT}. `evalsuite sandbox` shows what this machine allows."
    )


def summary(info: Mapping[str, Any]) -> str:
    """`Sandbox.describe()` (with the setting and the levels available) as lines for a person."""
    shown = ("setting", "isolation", "uid", "files", "processes", "network", "memory", "starvation", "state", "python")
    lines = [f"{key + ':':<12}{info[key]}" for key in shown if key in info]
    lines.append(f"{'packages:':<12}{', '.join(info.get('packages') or ['(none)'])}")
    lines.append(f"{'available:':<12}{', '.join(info.get('available', []))} (none only when asked for)")
    return "\n".join(lines)
