"""The rig's own error type, so the CLI prints its messages without a traceback."""

from __future__ import annotations

from evalsuite.errors import EvalsuiteError


class RigError(EvalsuiteError):
    """Building llama-server, making the rig's models or starting a rig server failed."""

    exit_code = 4


def missing_models(config: str, missing: dict[str, str | None]) -> RigError:
    """Configuration `config` lacks the model files of `missing` (role -> the command that makes it, if one does)."""
    commands = "; ".join(f"{role}: `{command}`" for role, command in missing.items() if command)
    return RigError(
        f"Rig configuration '{config}' needs the model file(s) {', '.join(missing)}, which this installation "
        f"lacks. The table of models in docs/rig.md says how each is made{f' ({commands})' if commands else ''}."
    )
