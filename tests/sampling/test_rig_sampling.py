"""sample-test on the reference rig: lossless drafters keep the distribution, fake acceptance does not.

One baseline arm is drawn once and every candidate arm is judged against it.
Draw counts are modest (2 shared CPU cores in CI), so SAME is stated with the
TV distance these draws can detect; the CLI and bench/sampling.py show what
more draws buy.  Seeds are fixed, so on one server build the draws and the
verdicts are reproducible.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from projects import copy_project, rig_target

from evalsuite.config import load_config
from evalsuite.rig.launcher import serve
from evalsuite.sampling.plan import DrawSettings
from evalsuite.sampling.run import SampleTest, draw_arm, judge_arms, load_arm
from evalsuite.sampling.tree import build_tree
from evalsuite.sampling.verdict import JudgeSettings

pytestmark = pytest.mark.rig

SETTINGS = DrawSettings(draws=96, prompts=2, max_tokens=8, temperature=0.7, top_k=8, top_p=1.0)
JUDGE = JudgeSettings(alpha=0.01, max_tv=0.5)  # a strict level: four SAME claims share this module
CANDIDATES = ("draft", "ngram", "dflash", "synthetic")


@pytest.fixture(scope="module")
def tests(rig_assets, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SampleTest]:
    targets = rig_target("baseline", baseline=None, control=None)
    targets += "".join(rig_target(name, control=None) for name in CANDIDATES)
    config = load_config(copy_project(tmp_path_factory.mktemp("sampling"), targets))

    def arm(name: str, role: str, stream: int) -> Path:
        (outcome,) = draw_arm(config, name, ["gsm8k"], SETTINGS, stream=stream)
        return outcome.folder

    base = load_arm([arm("baseline", "baseline", 42)])
    out = {"baseline-again": judge_arms(base, load_arm([arm("baseline", "candidate", 43)]), JUDGE)}
    for name in CANDIDATES:
        out[name] = judge_arms(base, load_arm([arm(name, "candidate", 43)]), JUDGE)
    return out


def test_the_rig_reproduces_a_draw_from_its_seed(rig_assets) -> None:
    body = {
        "messages": [{"role": "user", "content": "Tom has 3 apples and buys 4 more."}],
        "max_tokens": 12,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "cache_prompt": False,
        "logprobs": True,
        "top_logprobs": 1,
    }

    def ids(client: httpx.Client, url: str, seed: int) -> list[int]:
        r = client.post(url + "/v1/chat/completions", json={**body, "seed": seed})
        r.raise_for_status()
        return [e["id"] for e in r.json()["choices"][0]["logprobs"]["content"]]

    with serve(["baseline", "dflash"]) as servers, httpx.Client(timeout=300) as client:
        for name in ("baseline", "dflash"):
            url = servers[name].base_url
            first = [ids(client, url, s) for s in (1, 2, 3, 4)]
            assert [ids(client, url, s) for s in (1, 2, 3, 4)] == first, f"{name}: a seed must give the same draw"
            assert len({tuple(x) for x in first}) > 1, f"{name}: different seeds never differed at temperature 1"


@pytest.mark.parametrize("name", ["baseline-again", "draft", "ngram", "dflash"])
def test_lossless_configurations_keep_the_distribution(name: str, tests: dict[str, SampleTest]) -> None:
    v = tests[name].verdict
    assert v.outcome == "SAME", v.sentence
    assert v.family >= 2 and v.detectable <= JUDGE.max_tv
    assert f"would detect TV >= {v.detectable:.2f}" in v.sentence


def test_fake_acceptance_changes_the_distribution_at_named_nodes(tests: dict[str, SampleTest]) -> None:
    test = tests["synthetic"]
    v = test.verdict
    assert v.outcome == "DIFFERENT", v.sentence
    strongest = min(v.differing, key=lambda n: n.p_adjusted)
    key = (strongest.prompt_id, strongest.prefix)
    a, b = build_tree(test.baseline.draws).counts[key], build_tree(test.candidate.draws).counts[key]
    token = strongest.over_represented
    assert b[token] / sum(b.values()) > a[token] / sum(a.values())  # the named token really is over-represented
    assert test.candidate.accepted > 0  # fake acceptance did accept drafts
    assert test.as_dict()["nodes"][0]["context"] is not None
