"""The rig's own error type, so the CLI prints its messages without a traceback."""

from __future__ import annotations

from evalsuite.errors import EvalsuiteError


class RigError(EvalsuiteError):
    """Building llama-server, making the rig's models or starting a rig server failed."""

    exit_code = 4
