"""The run fingerprint: a hash over everything that changes outputs.

Same fingerprint = same run, so re-running a command resumes it; anything
different (server build, model, flags, prompt, parameters, data, suite
version) starts a new run and leaves the old one intact.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    """Stable JSON: sorted keys, no whitespace, tuples as lists."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def fingerprint(fields: dict[str, Any]) -> str:
    """Hex sha256 of the canonical fields (first 16 digits are used in folder names)."""
    return hashlib.sha256(canonical(fields).encode()).hexdigest()
