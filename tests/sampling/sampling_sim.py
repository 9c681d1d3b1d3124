"""A small simulated language model for testing the sampling statistics without a server.

Each prefix gets its own next-token distribution over a tiny vocabulary (plus
END), drawn once from a seeded generator keyed by the prefix, so the tree
branches like a real model's: peaked, prompt-dependent, a few likely tokens.
`tilt` makes a lossy variant: at the given prefixes, one token's probability
is raised (a drafter whose tokens are over-represented).
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field

import numpy as np

from evalsuite.sampling import END, Draw

VOCAB = 6


@dataclass
class ToyModel:
    prompt: str
    sharpness: float = 2.0
    end_p: float = 0.05
    tilt: dict[tuple[int, ...], tuple[int, float]] = field(default_factory=dict)  # prefix -> (token, added mass)
    _cache: dict[tuple[int, ...], list[float]] = field(default_factory=dict)

    def probs(self, prefix: tuple[int, ...]) -> list[float]:
        """Cumulative next-outcome probabilities over tokens 0..VOCAB-1 and END (last entry)."""
        if prefix not in self._cache:
            key = hashlib.sha256(f"{self.prompt}|{prefix}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(key[:8], "little"))
            logits = rng.standard_normal(VOCAB) * self.sharpness
            p = np.exp(logits - logits.max())
            p = p / p.sum() * (1 - self.end_p)
            p = np.append(p, self.end_p)
            if prefix in self.tilt:
                token, mass = self.tilt[prefix]
                p = p * (1 - mass)
                p[token] += mass
            self._cache[prefix] = np.cumsum(p).tolist()
        return self._cache[prefix]

    def draws(self, n: int, length: int, rng: np.random.Generator, seed0: int = 0) -> list[Draw]:
        out = []
        for k in range(n):
            ids: list[int] = []
            ended = False
            for u in rng.random(length).tolist():
                choice = bisect.bisect_right(self.probs(tuple(ids)), u)
                if choice >= VOCAB:
                    ended = True
                    break
                ids.append(choice)
            out.append(Draw(self.prompt, seed0 + k, tuple(ids), ended))
        return out


def arm(models: list[ToyModel], n: int, length: int, rng: np.random.Generator) -> list[Draw]:
    return [d for m in models for d in m.draws(n, length, rng)]


__all__ = ["END", "ToyModel", "arm", "VOCAB"]
