"""Everything a rig server needs on disk: the built binary and the model files by role."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalsuite.rig.build import ensure_llama_server, rig_paths
from evalsuite.rig.committed import LEARNED_DFLASH, LEARNED_MODEL, verify_learned_checksum
from evalsuite.rig.errors import RigError
from evalsuite.rig.gguf_file import requantize
from evalsuite.rig.models import generate_models

ROLES = (
    "target",
    "draft",
    "quant",
    "dflash",
    "mtp",
    "learned",
    "learned-draft",
    "learned-dflash",
    "smollm2",
    "smollm2-draft",
    "smollm2-dflash",
)


@dataclass(frozen=True)
class RigAssets:
    """The binary, the cache folder and one GGUF path per model role."""

    home: Path
    binary: Path
    models: dict[str, Path]


def ensure_assets(
    progress: Callable[[str], None] = print, *, include_learned: bool = True, include_smollm2: bool = False
) -> RigAssets:
    """Build llama-server and generate the models if needed (fast when everything is cached).

    `include_learned=False` skips the committed trained models (used while retraining them);
    `include_smollm2=True` adds the real SmolLM2 model and its draft (a 93 MB download the first time).
    """
    binary = ensure_llama_server(progress)
    paths = rig_paths()
    models = generate_models(paths.vocab_dir, paths.models_dir, progress).as_dict()
    if include_smollm2:
        from evalsuite.rig.smollm2 import ensure_smollm2_models

        models |= ensure_smollm2_models(paths.models_dir, progress)
    if not include_learned:
        return RigAssets(home=paths.home, binary=binary, models=models)
    if not LEARNED_MODEL.is_file():
        raise RigError(
            f"The trained rig model {LEARNED_MODEL} is missing (the package ships it; a checkout keeps it in "
            "fixtures/models/): reinstall evalsuite, restore it with git, or rebuild it with "
            "`evalsuite rig models --retrain`."
        )
    digest = verify_learned_checksum()
    models["learned"] = LEARNED_MODEL
    learned_draft = paths.models_dir / f"rig-learned-{digest[:12]}-q4_0.gguf"
    if not learned_draft.is_file():
        progress(f"Requantizing {LEARNED_MODEL.name} to Q4_0 as its draft model.")
        requantize(LEARNED_MODEL, learned_draft, "Q4_0")
    models["learned-draft"] = learned_draft
    if LEARNED_DFLASH.is_file():
        verify_learned_checksum(LEARNED_DFLASH)
        models["learned-dflash"] = LEARNED_DFLASH
    return RigAssets(home=paths.home, binary=binary, models=models)
