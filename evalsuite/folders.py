"""Folder names for targets: where a target's runs and reports go on disk."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._+=,@-]+")


def folder_name(target: str) -> str:
    """The folder a target's runs and reports go in: its name with what a path or a shell would misread replaced.

    A grid point `dflash[n_max=4]` becomes `dflash@n_max=4` (brackets are glob patterns to a shell and to
    `Path.glob`); slashes, spaces and other characters become `_`.  Plain names are unchanged.
    """
    text = target.replace("[", "@").replace("]", "")
    return _UNSAFE.sub("_", text).strip("._") or "target"
