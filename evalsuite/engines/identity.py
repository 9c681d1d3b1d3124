"""The server's identity, checked on every response so one run never mixes two servers.

A restarted server, or a proxy that routes to a different model, keeps
answering 200 while the run quietly starts measuring something else.  Every
response states who answered (`model`, and `system_fingerprint` where the
engine gives one: llama.cpp's build, OpenAI's backend configuration); the
first one seen (or the one stored by an earlier session of the same run) is
the run's identity, and any response that names another stops the run.
"""

from __future__ import annotations

from typing import Any

from evalsuite.errors import EndpointError

IDENTITY_KEYS = ("model", "system_fingerprint")


class ServerChanged(EndpointError):
    """A response came from a different server identity than the rest of the run (exit 3, not retried)."""


def response_identity(data: dict[str, Any], keys: tuple[str, ...] = IDENTITY_KEYS) -> dict[str, str]:
    """The identity fields a response states (absent ones are simply not compared)."""
    return {key: data[key] for key in keys if isinstance(data.get(key), str) and data[key]}


class IdentityWatch:
    """Holds the run's server identity and refuses any response that states another."""

    def __init__(self, endpoint: str, keys: tuple[str, ...] = IDENTITY_KEYS):
        self.endpoint = endpoint
        self.keys = keys
        self.known: dict[str, str] = {}
        self.source = "the first response of this run"

    def seed(self, known: dict[str, Any], source: str) -> None:
        """Start from an identity stored earlier (a resumed run must continue with the same server)."""
        self.known = {k: v for k, v in known.items() if k in self.keys and isinstance(v, str) and v}
        self.source = source

    def check(self, data: dict[str, Any]) -> None:
        seen = response_identity(data, self.keys)
        changed = {k: (self.known[k], v) for k, v in seen.items() if k in self.known and self.known[k] != v}
        if changed:
            what = "; ".join(f"{k} was {old!r} in {self.source}, now {new!r}" for k, (old, new) in changed.items())
            raise ServerChanged(
                f"The server at {self.endpoint} changed identity during the run ({what}). "
                "A run must not mix two servers: the run stopped and keeps what it stored. Restore the original "
                "server and re-run to resume, or start a new run for the new one."
            )
        for key, value in seen.items():
            self.known.setdefault(key, value)
