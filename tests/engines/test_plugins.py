"""A new engine or grader is one outside module plus an entry point: found, validated and run end to end.

The outside package is real installed metadata (a `.dist-info` folder with
`entry_points.txt`) on `sys.path`, exactly what `pip install` leaves behind,
so the suite's lookup is exercised as it is for any third-party package.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import FakeServer
from projects import make_project

from evalsuite import plugins
from evalsuite.cli import main
from evalsuite.config import load_config
from evalsuite.engines import engine_class, engine_names, make_engine
from evalsuite.errors import ConfigError
from evalsuite.graders import get_grader, grader_names
from evalsuite.speed import speed_summary
from evalsuite.store.run import open_run
from evalsuite.tasks.schema import GraderSpec

OUTSIDE_ENGINE = '''
"""An engine no evalsuite module knows: one subclass, one extra request field, its own draft counts."""
from typing import Any

from evalsuite.engines import Engine, Speculation
from evalsuite.records import Completion, GenerationParams

SEEN: list[dict[str, Any]] = []


class OutsideEngine(Engine):
    name = "outside"

    def extra_fields(self, params: GenerationParams) -> dict[str, Any]:
        return {"outside_marker": params.max_tokens}

    def request_body(self, sample, params):
        body = super().request_body(sample, params)
        SEEN.append(body)
        return body

    @classmethod
    def request_speculation(cls, completion: Completion) -> Speculation | None:
        predicted = completion.timings.get("predicted_n")
        if predicted is None:
            return None
        return Speculation("outside counts", drafted=int(predicted) * 2, accepted=int(predicted), predicted=int(predicted))
'''

OUTSIDE_GRADER = '''
"""A grader no evalsuite module knows: correct when the text has at least `min_words` words."""
from evalsuite.records import Grade


class WordCountGrader:
    name = "wordcount"
    version = "wordcount-1"

    def __init__(self, extraction, min_words=1):
        self.min_words = min_words

    def grade_batch(self, items, *, workers=None):
        out = []
        for item in items:
            words = len(item.text.split())
            status = "correct" if words >= self.min_words else "incorrect"
            out.append(Grade(item.sample.id, status, str(words), f"{words} words", float(status == "correct")))
        return out
'''

ENTRY_POINTS = """\
[evalsuite.engines]
outside = outside_pkg.engine:OutsideEngine
broken = outside_pkg.missing:Nothing
notanengine = outside_pkg.grader:WordCountGrader

[evalsuite.graders]
wordcount = outside_pkg.grader:WordCountGrader
"""


@pytest.fixture
def outside_package(tmp_path: Path) -> Iterator[Path]:
    """Install (onto sys.path) a package registering an engine and a grader, as pip would leave it."""
    site = tmp_path / "site"
    pkg = site / "outside_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine.py").write_text(OUTSIDE_ENGINE)
    (pkg / "grader.py").write_text(OUTSIDE_GRADER)
    info = site / "outside_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: outside-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    sys.path.insert(0, str(site))
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m == "outside_pkg" or m.startswith("outside_pkg.")]:
            del sys.modules[name]


def test_builtin_engines_and_graders_come_from_the_same_entry_points() -> None:
    assert {"openai", "llamacpp", "vllm", "sglang"} <= set(engine_names())
    assert {"math", "gsm8k", "gsm8k_lmeval", "code", "lmeval"} <= set(grader_names())
    assert plugins.registered(plugins.ENGINES)["llamacpp"] == "evalsuite.engines.llamacpp:LlamaCppEngine"
    assert {"livecodebench", "humaneval"} <= set(plugins.names(plugins.TASK_ADAPTERS))
    assert [n for n in ("openai", "llamacpp", "vllm", "sglang") if engine_class(n).takes_ignore_eos] == [
        "llamacpp",
        "vllm",
        "sglang",
    ]


def test_unknown_names_are_refused_naming_the_known_ones(tmp_path: Path) -> None:
    config = tmp_path / "evalsuite.toml"
    config.write_text('[targets.a]\nbase_url = "http://x/v1"\nengine = "outside"\n')
    message = str(pytest.raises(ConfigError, load_config, config).value)
    assert "targets.a.engine = 'outside'" in message
    assert "'llamacpp'" in message and "'sglang'" in message and "'vllm'" in message and "'openai'" in message
    with pytest.raises(ConfigError, match=r"Unknown grader 'wordcount'\. Known graders: code, gsm8k"):
        get_grader(GraderSpec(name="wordcount"))


def test_broken_and_wrong_plugins_are_sentences(outside_package: Path) -> None:
    with pytest.raises(ConfigError, match=r"engine 'broken' \(outside_pkg.missing:Nothing\) cannot be loaded: Module"):
        engine_class("broken")
    with pytest.raises(ConfigError, match=r"engine 'notanengine' .* is not a subclass of evalsuite.engines.Engine"):
        engine_class("notanengine")


def test_an_outside_engine_and_grader_run_end_to_end(
    tmp_path: Path, outside_package: Path, fake_server: FakeServer
) -> None:
    config = make_project(tmp_path, fake_server.base_url)
    config.write_text(config.read_text().replace('engine = "llamacpp"', 'engine = "outside"', 1))
    task = tmp_path / "tasks" / "echo.yaml"
    task.write_text(
        task.read_text().replace(
            "  name: gsm8k\n  extraction: [hash_line, last_number]", "  name: wordcount\n  options: {min_words: 3}"
        )
    )
    target = load_config(config).target("base")
    assert target.engine == "outside" and "outside" in engine_names()
    assert type(make_engine(target)).__name__ == "OutsideEngine"

    assert main(["run", "base", "--config", str(config), "-q"]) == 0

    from outside_pkg.engine import SEEN  # the module the entry point loaded

    assert len(SEEN) == 10 and all(body["outside_marker"] == 64 for body in SEEN)
    (run_dir,) = (tmp_path / "runs" / "base" / "echo").iterdir()
    store = open_run(run_dir)
    assert store.manifest.probe.dialect == "outside"
    grades = store.grades()
    assert len(grades) == 10 and {g.status for g in grades.values()} == {"correct"}
    assert all(g.extracted == str(len(store.results()[sid].completion.text.split())) for sid, g in grades.items())
    speed = speed_summary(store)
    tokens = [r.completion.timings["predicted_n"] for r in store.results().values()]
    assert speed.draft_n == 2 * sum(tokens) and speed.draft_accepted == sum(tokens)
    assert speed.acceptance_rate == pytest.approx(0.5)


def test_builtin_engines_read_their_own_speculation() -> None:
    from evalsuite.engines import counter_speculation, request_speculation
    from evalsuite.records import Completion

    llama = Completion("x", "stop", timings={"draft_n": 10.0, "draft_n_accepted": 7.0, "predicted_n": 12.0})
    spec = request_speculation(llama, "llamacpp")
    assert spec is not None and (spec.drafted, spec.accepted, spec.predicted) == (10, 7, 12)
    assert request_speculation(llama, "sglang") is None and request_speculation(llama, "openai") is None
    sglang = Completion("x", "stop", engine_extra={"meta_info": {"spec_accept_length": 2.5}})
    spec = request_speculation(sglang)
    assert spec is not None and spec.mean_accepted_length == 2.5 and spec.drafted is None
    before = {"vllm:spec_decode_num_drafts": 4.0, "vllm:spec_decode_num_accepted_tokens": 6.0}
    after = {"vllm:spec_decode_num_drafts": 14.0, "vllm:spec_decode_num_accepted_tokens": 21.0}
    counted = counter_speculation(before, after, "vllm")
    assert counted is not None and (counted.drafts, counted.accepted) == (10.0, 15.0)
    assert counted.mean_accepted_length == pytest.approx(2.5)
    assert counter_speculation(before, after, "llamacpp") is None
    assert counter_speculation(after, before, "vllm").accepted == 0.0  # a reset server counts nothing, not less
