"""sample-test on the reference rig: lossless drafters keep the distribution, fake acceptance does not.

The lossless drafters run on the learned target with the sampling table of
the project's own config (LiveCodeBench prompts, where that model branches;
see evalsuite.toml), so these tests also prove that those tables (`make
sample-test TARGET=learned-dflash`) reach nodes that branch and that every drafter actually drafted and
had drafts accepted under sampling.  Fake acceptance (`synthetic`) runs on the
constructed target with the built-in settings.  One baseline arm per model is
drawn once; each test draws one candidate arm (under a minute on 2 cores).
Draw counts are modest, so SAME is stated with the TV distance these draws can
detect; bench/sampling.py shows what more draws buy.  Seeds are fixed, so on
one server build the draws and the verdicts are reproducible.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from projects import copy_project, rig_target, shipped_sampling

from evalsuite.config import Config, load_config
from evalsuite.rig.launcher import serve
from evalsuite.sampling.plan import DrawSettings, resolve_settings
from evalsuite.sampling.run import Arm, SampleTest, draw_arm, judge_arms, load_arm
from evalsuite.sampling.tree import build_tree
from evalsuite.sampling.verdict import JudgeSettings
from evalsuite.serialize import to_jsonable

pytestmark = pytest.mark.rig

JUDGE = JudgeSettings(alpha=0.01, max_tv=0.5)  # a strict level: five SAME claims share this module
LEARNED = ("learned-draft", "learned-ngram", "learned-dflash")
DRAWS = {"learned-ngram": 96}  # its draws are 32 tokens long (its table)
LEARNED_DRAWS = 128  # the config's other settings, fewer draws than its 256 (CI time)
CONSTRUCTED = DrawSettings(draws=96, prompts=2, max_tokens=8, temperature=0.7, top_k=8, top_p=1.0)


class Rig:
    """A scratch project with the rig targets and the shipped sampling tables; draws one arm at a time."""

    def __init__(self, folder: Path) -> None:
        targets = rig_target(
            "learned-baseline", baseline=None, control=None, extra=shipped_sampling("learned-baseline")
        )
        targets += "".join(
            rig_target(n, baseline="learned-baseline", control=None, extra=shipped_sampling(n)) for n in LEARNED
        )
        targets += rig_target("baseline", baseline=None, control=None)
        targets += rig_target("synthetic", control=None)
        self.config: Config = load_config(copy_project(folder, targets))
        self.arms: dict[tuple[str, int, DrawSettings], Arm] = {}

    def settings(self, candidate: str) -> tuple[DrawSettings, list[str]]:
        """The settings `sample-test CANDIDATE` would use, with fewer draws."""
        draws = DRAWS.get(candidate, LEARNED_DRAWS)
        resolved = resolve_settings(self.config, candidate, "learned-baseline", {"draws": draws})
        return resolved.settings, resolved.tasks

    def arm(self, name: str, stream: int, settings: DrawSettings, tasks: list[str]) -> Arm:
        """One arm's draws (drawn once per name, stream and settings in this module)."""
        key = (name, stream, settings)
        if key not in self.arms:
            outcomes = draw_arm(self.config, name, tasks, settings, stream=stream)
            self.arms[key] = load_arm([o.folder for o in outcomes])
        return self.arms[key]

    def pair(self, candidate: str, *, baseline: str = "learned-baseline") -> SampleTest:
        """The candidate's draws judged against the baseline's, drawn with the same settings (stream 42 vs 43)."""
        settings, tasks = self.settings(candidate)
        base = self.arm(baseline, 42, settings, tasks)
        return judge_arms(base, self.arm(candidate, 43, settings, tasks), JUDGE)


@pytest.fixture(scope="module")
def rig(rig_assets, tmp_path_factory: pytest.TempPathFactory) -> Rig:
    return Rig(tmp_path_factory.mktemp("sampling"))


def test_the_shipped_tables_sample_livecodebench_at_temperature_1_without_top_k(rig: Rig) -> None:
    settings, tasks = rig.settings("learned-dflash")
    assert tasks == ["livecodebench"] and settings.temperature >= 1.0 and not settings.top_k
    assert rig.settings("learned-ngram")[0].max_tokens > settings.max_tokens


def test_the_baseline_against_itself_with_another_seed_stream_is_the_same(rig: Rig) -> None:
    _assert_same(rig.pair("learned-baseline"))


@pytest.mark.parametrize("name", LEARNED)
def test_lossless_drafters_keep_the_distribution_while_accepting_drafts(name: str, rig: Rig) -> None:
    test = rig.pair(name)
    _assert_same(test)
    assert test.candidate.accepted > 0, f"{name} accepted no draft under sampling: {test.candidate.drafted} drafted"
    assert test.candidate.speculation() in test.verdict.notes
    assert to_jsonable(test)["candidate"]["acceptance"] > 0


def test_this_llama_cpp_reproduces_the_baselines_draws_seed_for_seed(rig: Rig) -> None:
    """Not required by losslessness (vLLM's rejection sampler consumes its random numbers otherwise),
    but true here: with the same seed, draft-simple and DFlash sample the baseline's very tokens."""
    settings, tasks = rig.settings("learned-dflash")
    same_stream = {(d.prompt_id, d.seed): d.ids for d in rig.arm("learned-baseline", 43, settings, tasks).draws}
    for name in ("learned-draft", "learned-dflash"):
        draws = {(d.prompt_id, d.seed): d.ids for d in rig.arm(name, 43, settings, tasks).draws}
        identical = sum(same_stream.get(k) == ids for k, ids in draws.items())
        assert draws.keys() == same_stream.keys() and identical >= 0.98 * len(draws), f"{name}: {identical} identical"


def _assert_same(test: SampleTest) -> None:
    v = test.verdict
    assert v.outcome == "SAME", v.sentence
    assert v.family >= 2 and v.detectable <= JUDGE.max_tv
    assert f"would detect TV >= {v.detectable:.2f}" in v.sentence
    assert all(len(n.test.outcomes) >= 2 for n in v.nodes)  # every tested node branched in the draws


def test_fake_acceptance_changes_the_distribution_at_named_nodes(rig: Rig) -> None:
    base = rig.arm("baseline", 42, CONSTRUCTED, ["gsm8k"])
    test = judge_arms(base, rig.arm("synthetic", 43, CONSTRUCTED, ["gsm8k"]), JUDGE)
    v = test.verdict
    assert v.outcome == "DIFFERENT", v.sentence
    strongest = min(v.differing, key=lambda n: n.p_adjusted)
    key = (strongest.prompt_id, strongest.prefix)
    a, b = build_tree(test.baseline.draws).counts[key], build_tree(test.candidate.draws).counts[key]
    token = strongest.over_represented
    assert b[token] / sum(b.values()) > a[token] / sum(a.values())  # the named token really is over-represented
    assert test.candidate.accepted > 0  # fake acceptance did accept drafts
    assert to_jsonable(test)["nodes"][0]["context"] is not None


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
