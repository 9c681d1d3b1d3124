"""The rig's committed trained models and their checksums.

The files are built by the rig-building code of a checkout (`rigbuild/`) and committed with a `.sha256`
sidecar each; the package ships them, so serving them needs only their paths and a checksum check.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from evalsuite.rig.errors import RigError
from evalsuite.tasks.packaged import packaged_fixtures

MODELS = packaged_fixtures() / "models"
"""The committed models, shipped in the package (`fixtures/models/` in the repository)."""
LEARNED_MODEL = MODELS / "rig-learned.gguf"
"""The model trained on half the fixture problems (rigbuild/learned.py)."""
LEARNED_CHECKSUM = LEARNED_MODEL.with_name(LEARNED_MODEL.name + ".sha256")
LEARNED_DFLASH = MODELS / "rig-learned-dflash.gguf"
"""A DFlash drafter trained against the learned model (`evalsuite rig models --train-dflash`)."""


def sha256_of(path: Path) -> str:
    """The file's sha256, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_learned_checksum(
    path: Path = LEARNED_MODEL, rebuild: str = "evalsuite rig models --retrain --update-checksum"
) -> str:
    """A committed model's sha256, checked against its committed `.sha256` sidecar; a mismatch is an error
    that names `rebuild`, the command that makes the file again."""
    sidecar = path.with_name(path.name + ".sha256")
    expected = sidecar.read_text().split()[0] if sidecar.is_file() else None
    actual = sha256_of(path)
    if expected is not None and actual != expected:
        raise RigError(
            f"{path} has sha256 {actual}, but {sidecar} records {expected}. "
            f"Restore the file with git, or rebuild it with `{rebuild}`."
        )
    return actual
