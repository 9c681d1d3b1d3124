"""The DFlash graph in torch without a server: the verify loop and what a block may see."""

from __future__ import annotations

import pytest

from rigbuild.dflash_graph import Acceptance, confident_prefix, walk


def test_walk_accepts_the_longest_matching_prefix_and_moves_past_the_target_token() -> None:
    tokens = [9, 9, 1, 2, 3, 4, 5, 6, 7]  # prompt [9, 9]; generation starts at position 2
    drafts = {2: [2, 3, 0], 3: [0, 0, 0], 4: [0, 0, 0], 5: [5, 6, 7], 6: [7, 0, 0], 7: [0, 0, 0]}
    result = walk([drafts[n] for n in range(2, 8)], tokens, 2)
    # anchor 2: [2,3] accepted, then target's 4 -> anchor 5 (token 4): [5,6,7] all accepted -> past the end
    assert result == Acceptance(steps=2, drafted=6, accepted=5)


def test_walk_with_useless_drafts_takes_one_step_per_token() -> None:
    tokens = list(range(10))
    result = walk([[-1, -1]] * 7, tokens, 3)
    assert result == Acceptance(steps=6, drafted=12, accepted=0)


def test_p_min_cuts_a_draft_before_its_first_doubtful_token_and_the_loop_takes_the_rest() -> None:
    tokens = [9, 1, 2, 3, 4, 5, 6]
    drafts = [[2, 3, 0], [3, 4, 5], [4, 5, 6], [5, 6, 0], [6, 0, 0]]
    confidence = [[0.9, 0.8, 0.2], [0.4, 0.9, 0.9], [0.9, 0.3, 0.9], [0.5, 0.5, 0.5], [0.1, 0.9, 0.9]]
    cut = confident_prefix(drafts, confidence, 0.45)
    assert cut == [[2, 3], [], [4], [5, 6, 0], []]
    # anchor 1: [2, 3] kept, target's 4 -> anchor 4: [5, 6, 0] drafted, 5 and 6 kept -> past the end
    assert walk(cut, tokens, 1) == Acceptance(steps=2, drafted=5, accepted=4)
    assert confident_prefix(drafts, confidence, 0.0) == drafts


def test_a_block_sees_only_context_before_its_anchor_and_is_non_causal() -> None:
    torch = pytest.importorskip("torch")
    from rigbuild.dflash_graph import DrafterShape, block_logits
    from rigbuild.dflash_train import init_drafter

    gen = torch.Generator().manual_seed(0)
    shape = DrafterShape(n_embd=32, n_layer=2, n_head=4, n_ff=64, n_draft=3, target_layers=(0, 1))
    params = {k: v.detach() for k, v in init_drafter(shape, 64, gen).items()}
    embd = torch.randn(50, 32, generator=gen)
    feats = torch.randn(20, 64, generator=gen)
    block = torch.tensor([[7, 3, 3, 3]])
    anchor = torch.tensor([12])
    base = block_logits(params, shape, feats, block, anchor, embd, embd)
    later = feats.clone()
    later[12:] = torch.randn(8, 64, generator=gen)  # the anchor's own and later positions are not context
    assert torch.allclose(block_logits(params, shape, later, block, anchor, embd, embd), base)
    earlier = feats.clone()
    earlier[11] += 1.0
    assert not torch.allclose(block_logits(params, shape, earlier, block, anchor, embd, embd), base)
    changed_last = torch.tensor([[7, 3, 3, 5]])  # non-causal: the last block token changes the first positions
    assert not torch.allclose(block_logits(params, shape, feats, changed_last, anchor, embd, embd)[0, 1], base[0, 1])
    both = block_logits(
        params, shape, feats, torch.tensor([[7, 3, 3, 3], [4, 3, 3, 3]]), torch.tensor([12, 5]), embd, embd
    )
    assert torch.allclose(both[0], base[0], atol=1e-5)  # batched blocks do not see each other
