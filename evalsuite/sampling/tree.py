"""The tree of sampled prefixes: how often each arm chose each next token after each prefix.

A draw is one sampled continuation of a prompt.  Every prefix of a draw is a
node of that prompt's tree; the node's outcome is the token sampled next, or
END when the draw stopped there on its own (end of sequence or a stop
string).  A draw cut by max_tokens has no outcome at its last prefix: it was
never allowed to choose.  Nodes are keyed by (prompt id, token-id prefix).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

END = -2
"""The outcome "the draw ended here" (token ids are >= 0; -1 means a missing id)."""


@dataclass(frozen=True)
class Draw:
    """One sampled continuation: its prompt, its seed, its token ids and whether it ended by itself."""

    prompt_id: str
    seed: int
    ids: tuple[int, ...]
    ended: bool


NodeKey = tuple[str, tuple[int, ...]]


@dataclass
class PrefixTree:
    """Next-outcome counts per node for one arm, plus the decoded text of every token seen."""

    counts: dict[NodeKey, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    draws: Counter[str] = field(default_factory=Counter)

    def reached(self, key: NodeKey) -> int:
        """How many draws of this arm made a choice at the node."""
        node = self.counts.get(key)
        return sum(node.values()) if node else 0


def build_tree(draws: Iterable[Draw], *, max_depth: int | None = None) -> PrefixTree:
    """Count each draw's outcome at each of its prefixes (up to `max_depth` tokens of context)."""
    tree = PrefixTree()
    for draw in draws:
        if any(i < 0 for i in draw.ids):
            raise ValueError(
                f"draw {draw.prompt_id} seed {draw.seed} has tokens without ids; the prefix tree needs ids"
            )
        tree.draws[draw.prompt_id] += 1
        depth = len(draw.ids) if max_depth is None else min(len(draw.ids), max_depth)
        for i in range(depth):
            tree.counts[(draw.prompt_id, draw.ids[:i])][draw.ids[i]] += 1
        if draw.ended and (max_depth is None or len(draw.ids) < max_depth):
            tree.counts[(draw.prompt_id, draw.ids)][END] += 1
    return tree


def shared_nodes(a: PrefixTree, b: PrefixTree, min_count: int) -> list[NodeKey]:
    """Nodes both arms reached at least `min_count` times, in prompt then depth then prefix order.

    Which nodes qualify depends only on how many draws arrived, never on what
    they chose there, so selecting them does not bias the test at the node.
    """
    keys = [k for k in a.counts if a.reached(k) >= min_count and b.reached(k) >= min_count]
    return sorted(keys, key=lambda k: (k[0], len(k[1]), k[1]))
