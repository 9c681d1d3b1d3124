"""lm-evaluation-harness tasks run through the suite.

lm-eval does what it does best: it loads a task's documents, builds its
prompts (few-shot, chat template handling, `doc_to_text`, generation
settings), applies its filters and computes its metrics per sample.  The
suite does the rest: greedy seeded requests through its engines, tokens and
logprobs in the run store, the token diff, the statistics and the verdict per
lm-eval (sub)task.

lm-eval is an optional extra (`pip install evalsuite[lmeval]`): nothing here
imports it at module level, so `import evalsuite` and the core install stay
free of it.
"""

from __future__ import annotations

from types import ModuleType

from evalsuite.errors import ConfigError

PINNED = "0.4.13"
"""The lm-eval release this adapter is written and tested against."""


def require() -> ModuleType:
    """Import lm_eval, or say in one sentence how to get it."""
    try:
        import lm_eval
    except ImportError:
        raise ConfigError(
            "lm-eval tasks need lm-evaluation-harness, which is not installed: "
            f"pip install 'evalsuite[lmeval]' (lm_eval=={PINNED})."
        ) from None
    return lm_eval


def version() -> str:
    """The installed lm-eval version (recorded in every lm-eval run's fingerprint)."""
    from importlib.metadata import version as dist_version

    require()
    return dist_version("lm_eval")
