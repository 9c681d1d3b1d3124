"""pytest plugin: one test item per sample, failing when the candidate's tokens diverge from the baseline's.

    pytest --evalsuite-run RUN --evalsuite-baseline BASE [--evalsuite-control CTL]
    pytest --evalsuite-target dflash [--evalsuite-task gsm8k] [--evalsuite-limit 50]

Items are named `evalsuite::<task>::<sample id>`, so `-k`, `-x`, `--junitxml`
and pytest-xdist's `-n` work as for any test.  Without test paths on the
command line only the gate's items are collected; with paths, both.  Runs are
generated on the controller only and handed to xdist workers by folder.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from evalsuite.gate.policy import POLICIES, Policy

if TYPE_CHECKING:
    from evalsuite.gate.runs import GateComparison, GatePair

_PAIRS = "evalsuite_gate_pairs"
_STATE = pytest.StashKey["GateState"]()


class GateState:
    """The pairs to gate in this process, each compared lazily once."""

    def __init__(self, pairs: list[GatePair], policy: Policy, near_tie: float | None):
        from evalsuite.diff.classify import DEFAULT_NEAR_TIE_NATS

        self.pairs, self.policy = pairs, policy
        self.near_tie = DEFAULT_NEAR_TIE_NATS if near_tie is None else near_tie
        self._compared: dict[int, GateComparison] = {}

    def compared(self, index: int) -> GateComparison:
        from evalsuite.errors import EvalsuiteError
        from evalsuite.gate.runs import compare_pair

        if index not in self._compared:
            try:
                self._compared[index] = compare_pair(self.pairs[index], self.near_tie)
            except EvalsuiteError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._compared[index]


def _limit(text: str) -> int | Literal["all"]:
    """--evalsuite-limit parsed as `evalsuite eval --limit` is (the CLI is imported only when the option is given)."""
    from evalsuite.cli import limit_arg

    return limit_arg(text)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("evalsuite", "evalsuite gate: token identity of a speculative run against its baseline")
    g.addoption(
        "--evalsuite-run",
        action="append",
        default=[],
        metavar="DIR",
        help="stored candidate run folder (repeatable, one per task)",
    )
    g.addoption(
        "--evalsuite-baseline",
        action="append",
        default=[],
        metavar="DIR",
        help="stored baseline run folder; optional when the config names the run's baseline target",
    )
    g.addoption(
        "--evalsuite-control",
        action="append",
        default=[],
        metavar="DIR",
        help="stored control run (the target as its own drafter) to calibrate the threshold",
    )
    g.addoption("--evalsuite-target", metavar="NAME", help="run the target, its baseline and control first, then gate")
    g.addoption("--evalsuite-task", action="append", default=[], metavar="NAME", help="tasks for --evalsuite-target")
    g.addoption(
        "--evalsuite-limit",
        type=_limit,
        metavar="N",
        help="only the first N samples of each task (--evalsuite-target; 'all': every one; default: defaults.limit)",
    )
    g.addoption(
        "--evalsuite-allow",
        action="append",
        default=[],
        metavar="FIELD",
        help="waive a must-match fingerprint field on purpose, e.g. server.model (repeatable; "
        "--evalsuite-target also uses the target's allow_differences)",
    )
    g.addoption("--evalsuite-config", metavar="PATH", help="evalsuite.toml (default: ./evalsuite.toml)")
    g.addoption(
        "--evalsuite-policy",
        choices=POLICIES,
        default="numerical",
        help="strict: any divergence fails; numerical (default): near-tie and control-explained divergences pass",
    )
    g.addoption(
        "--evalsuite-near-tie",
        type=float,
        default=None,
        metavar="NATS",
        help="gap between the tokens chosen below which a divergence counts as numerical (default: evalsuite's near-tie "
        "threshold; a control run can raise it)",
    )


def _active(config: pytest.Config) -> bool:
    return bool(config.getoption("evalsuite_run") or config.getoption("evalsuite_target"))


def _resolve(config: pytest.Config) -> list[GatePair]:
    from evalsuite.errors import EvalsuiteError
    from evalsuite.gate.runs import eval_pairs, stored_pairs

    opt = config.getoption
    try:
        if opt("evalsuite_target"):
            if opt("evalsuite_run"):
                raise EvalsuiteError("Give either --evalsuite-target or --evalsuite-run, not both.")
            tasks = [t.strip() for a in opt("evalsuite_task") for t in a.split(",") if t.strip()]
            return eval_pairs(
                opt("evalsuite_config"),
                opt("evalsuite_target"),
                tasks,
                opt("evalsuite_limit"),
                say=lambda m: print(m, file=sys.stderr),
                allow=opt("evalsuite_allow"),
            )
        return stored_pairs(
            opt("evalsuite_run"),
            opt("evalsuite_baseline"),
            opt("evalsuite_control"),
            opt("evalsuite_config"),
            opt("evalsuite_allow"),
        )
    except EvalsuiteError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_configure(config: pytest.Config) -> None:
    if not _active(config):
        return
    config.addinivalue_line("markers", "evalsuite: a sample of the evalsuite token-identity gate")
    from evalsuite.gate.runs import GatePair

    worker = getattr(config, "workerinput", None)
    pairs = GatePair.loads(worker[_PAIRS]) if worker and _PAIRS in worker else _resolve(config)
    config.stash[_STATE] = GateState(
        pairs, config.getoption("evalsuite_policy"), config.getoption("evalsuite_near_tie")
    )
    if config.args_source != pytest.Config.ArgsSource.ARGS and worker is None:
        config.args[:] = []  # no test paths given: run the gate alone, not the project's test suite


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the resolved run folders to each worker."""
    state = node.config.stash.get(_STATE, None)
    if state is not None:
        from evalsuite.gate.runs import GatePair

        node.workerinput[_PAIRS] = GatePair.dumps(state.pairs)


class GateFailure(Exception):
    """A sample that fails the gate; its message is the whole explanation."""


class TaskCollector(pytest.Collector):
    """The samples of one task's pair."""

    def __init__(self, *, index: int, **kw: Any):
        super().__init__(**kw)
        self.index = index

    def collect(self) -> Iterator[pytest.Item]:
        compared = self.config.stash[_STATE].compared(self.index)
        for sid in sorted(compared.answered("baseline") | compared.answered("candidate")):
            yield SampleItem.from_parent(self, name=sid, index=self.index)


class SampleItem(pytest.Item):
    """One sample: passes when its tokens match the baseline's (or diverge only numerically, per policy)."""

    def __init__(self, *, index: int, **kw: Any):
        super().__init__(**kw)
        self.index = index
        self.add_marker("evalsuite")

    def runtest(self) -> None:
        from evalsuite.gate.explain import failure_message, passes

        state: GateState = self.config.stash[_STATE]
        j = state.compared(self.index)
        sid, task = self.name, j.pair.task
        if sid not in j.answered("candidate"):
            raise GateFailure(f"{task}/{sid}: the candidate run ({j.pair.candidate}) has no result for this sample.")
        if sid not in j.answered("baseline"):
            raise GateFailure(f"{task}/{sid}: the baseline run ({j.pair.baseline}) has no result for this sample.")
        diff = j.diffs[sid]
        if not passes(diff, state.policy):
            raise GateFailure(
                failure_message(
                    diff,
                    j.baseline[sid].completion,
                    j.candidate[sid].completion,
                    j.thresholds,
                    state.policy,
                    task=task,
                    base_grade=j.grades["baseline"].get(sid),
                    cand_grade=j.grades["candidate"].get(sid),
                )
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, GateFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        task = self.parent.name if self.parent is not None else ""
        return self.path, None, f"evalsuite::{task}::{self.name}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the gate's items before -k / -m deselection runs."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    tasks = [p.task for p in state.pairs]
    for index, pair in enumerate(state.pairs):
        folder = Path(pair.candidate).resolve()
        name = pair.task if tasks.count(pair.task) == 1 else f"{pair.task}@{folder.parent.parent.name}-{index}"
        task = TaskCollector.from_parent(
            session, name=name, index=index, path=folder / "manifest.json", nodeid=f"evalsuite::{name}"
        )
        items.extend(task.collect())
