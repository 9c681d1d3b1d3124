"""A sandbox for model-written programs: namespaces (a user namespace for users other than root), an unprivileged
uid for root's runs, rlimits, CPU and own-wall-time limits, a bounded pool; refused where nothing isolates.

See docs/sandbox.md for what each isolation level protects against.
"""

from evalsuite.sandbox.executor import Program, Sandbox
from evalsuite.sandbox.isolation import Isolation, detect_isolation
from evalsuite.sandbox.levels import SandboxRefused, requested
from evalsuite.sandbox.limits import ExecResult, Limits

__all__ = [
    "ExecResult",
    "Isolation",
    "Limits",
    "Program",
    "Sandbox",
    "SandboxRefused",
    "detect_isolation",
    "requested",
]
