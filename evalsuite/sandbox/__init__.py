"""A sandbox for model-written programs: namespaces, an unprivileged uid, rlimits, a bounded pool.

See docs/sandbox.md for what each isolation level protects against.
"""

from evalsuite.sandbox.executor import Program, Sandbox
from evalsuite.sandbox.isolation import Isolation, detect_isolation
from evalsuite.sandbox.limits import ExecResult, Limits

__all__ = ["ExecResult", "Isolation", "Limits", "Program", "Sandbox", "detect_isolation"]
