"""The gate's policies, kept free of heavy imports because pytest loads the plugin in every session."""

from __future__ import annotations

from typing import Literal

Policy = Literal["strict", "numerical"]
POLICIES: tuple[Policy, ...] = ("strict", "numerical")
