"""Lossless under sampling: a two-sample test of two endpoints' output distributions.

`plan` draws many short seeded continuations per prompt from each arm
(resumable runs, one stored sample per prompt and draw), `tree` counts each
arm's next-token choices at every sampled prefix, `nodetest` compares the two
arms at each shared node, `power` says what the draws can detect, and
`verdict` combines the nodes with Holm's correction into SAME, DIFFERENT or
TOO_FEW.  See docs/statistics.md ("Lossless under sampling").
"""

from evalsuite.sampling.nodetest import NodeTest, node_test, pool, total_variation
from evalsuite.sampling.power import detectable_tv, draws_for_tv
from evalsuite.sampling.tree import END, Draw, PrefixTree, build_tree, shared_nodes
from evalsuite.sampling.verdict import JudgeSettings, NodeResult, SamplingVerdict, judge

__all__ = [
    "END",
    "Draw",
    "NodeResult",
    "NodeTest",
    "PrefixTree",
    "SamplingVerdict",
    "JudgeSettings",
    "build_tree",
    "detectable_tv",
    "draws_for_tv",
    "judge",
    "node_test",
    "pool",
    "shared_nodes",
    "total_variation",
]
