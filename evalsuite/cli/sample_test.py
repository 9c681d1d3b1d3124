"""`evalsuite sample-test TARGET`: is the output distribution under sampling the baseline's own?

Draws many short seeded continuations from the baseline and from TARGET with
the same sampling settings (resumable runs), tests the two prefix trees node
by node and prints the verdict with its power.  `--from-runs BASELINE_RUN
CANDIDATE_RUN` re-tests stored draws without asking any endpoint.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsuite.errors import ConfigError
from evalsuite.textfile import append_text, write_text

if TYPE_CHECKING:
    from evalsuite.config import Config
    from evalsuite.sampling.plan import ResolvedSettings
    from evalsuite.sampling.run import SampleTest
    from evalsuite.sampling.verdict import JudgeSettings

EPILOG = """\
examples:
  evalsuite sample-test dflash                        baseline vs dflash, settings from the config's tables
  evalsuite sample-test draft --draws 512             more draws per prompt: a smaller detectable TV
  evalsuite sample-test my-spec --temperature 1 --top-p 0.95 --top-k 40   your deployment's settings
  evalsuite sample-test baseline --baseline baseline  the baseline against itself, with other seeds
  evalsuite sample-test --from-runs BASE_RUN CAND_RUN re-test stored draws (no endpoint)

Settings: each flag, else [targets.TARGET.sampling], else the baseline's table, else
the built-in defaults (gsm8k, 2 prompts x 256 draws x 8 tokens, temperature 0.7,
top-k 8). `evalsuite eval TARGET --sampling` runs this too and folds it into its report.

The verdict is SAME (with the TV distance the draws could detect), DIFFERENT (with
the nodes), or TOO FEW DRAWS. Exit 0 only for SAME; 1 for DIFFERENT or too few draws.
Each draw is one stored sample with its own seed; re-running resumes, and more
--draws extends the same runs. Method and power: docs/statistics.md.
"""


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the command on the main parser's subcommands."""
    p = sub.add_parser(
        "sample-test",
        help="two-sample test of the output distribution at temperature > 0",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
        description="Speculative decoding promises that sampled outputs follow the target model's "
        "own distribution. Draw many short continuations from TARGET's baseline and from TARGET with "
        "the same sampling settings, each with its own seed, and test the two distributions on the "
        "tree of sampled prefixes.",
    )
    p.add_argument("target", nargs="?", help="a target name from the config")
    p.add_argument("--baseline", metavar="NAME", help="the reference target (default: TARGET's baseline)")
    p.add_argument(
        "--task", action="append", metavar="NAME", help="task(s) whose prompts are used (default: the table, or gsm8k)"
    )
    p.add_argument("--prompts", type=int, metavar="P", help="prompts per task (default: the table, or 2)")
    p.add_argument("--draws", type=int, metavar="N", help="draws per prompt and arm (default: the table, or 256)")
    p.add_argument("--tokens", type=int, metavar="L", help="tokens per draw (default: the table, or 8)")
    p.add_argument("--temperature", type=float, help="sampling temperature, > 0 (default: the table, or 0.7)")
    p.add_argument("--top-p", type=float, help="nucleus sampling (default: the table, or 1.0: off)")
    p.add_argument(
        "--top-k",
        type=int,
        help="top-k sampling, 0 = no limit (default: the table, or 8: a narrow tree, so deeper nodes get tested)",
    )
    p.add_argument("--seed", type=int, help="seed stream of the baseline arm; TARGET uses seed + 1 (default 42)")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise level, Holm across nodes (default 0.05)")
    p.add_argument(
        "--min-count",
        type=int,
        default=20,
        metavar="K",
        help="test a node only when both arms reached it K times (default 20)",
    )
    p.add_argument(
        "--max-tv",
        type=float,
        default=0.25,
        help="say SAME only when the draws would detect TV >= this (default 0.25); otherwise TOO FEW",
    )
    p.add_argument("--method", choices=["pearson", "g"], default="pearson", help="node statistic (default pearson)")
    p.add_argument(
        "--from-runs",
        nargs=2,
        metavar=("BASELINE_RUN", "CANDIDATE_RUN"),
        help="test stored draw runs (folders under <target>/<task>@sampling/) without drawing",
    )
    p.add_argument("--data", choices=["hf", "local", "fixture"], help="dataset source (default: defaults.data)")
    p.add_argument("--data-path", metavar="FILE", help="local JSONL/JSON/Parquet file for --data local")
    p.add_argument("--json", metavar="PATH", help="also write the verdict and nodes as JSON here")
    p.add_argument("--no-report", action="store_true", help="print the verdict only")
    p.add_argument("--config", metavar="PATH", help="config file (default: ./evalsuite.toml)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars; only results and errors")
    p.add_argument("-v", "--verbose", action="store_true", help="log retries and engine details")
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Draw (or read) both arms, judge, print the verdict, write the report; 0 only for SAME."""
    from evalsuite.cli.common import optional_config
    from evalsuite.config import load_config
    from evalsuite.sampling.run import judge_arms, load_arm, prompt_texts
    from evalsuite.sampling.verdict import JudgeSettings
    from evalsuite.serialize import dumps

    try:
        judge_settings = JudgeSettings(
            alpha=args.alpha, min_count=args.min_count, max_tv=args.max_tv, method=args.method
        )
    except ValueError as exc:
        raise ConfigError(f"{exc}.") from None
    if args.from_runs:
        config = optional_config(args)
        base, cand = args.from_runs
        test = judge_arms(load_arm([base]), load_arm([cand]), judge_settings, prompt_texts([base]))
        _print_verdict(test)
    else:
        if not args.target:
            raise ConfigError("Name a TARGET (or pass --from-runs BASELINE_RUN CANDIDATE_RUN).")
        config = load_config(args.config)
        flags = {k: getattr(args, k) for k in ("prompts", "draws", "tokens", "temperature", "top_p", "top_k", "seed")}
        flags["tasks"] = [n.strip() for arg in (args.task or []) for n in arg.split(",") if n.strip()] or None
        test = _draw_and_judge(args, config, flags, judge_settings)
    for node in sorted(test.verdict.differing, key=lambda n: n.p_adjusted)[:10]:
        print(
            f"  {node.prompt_id} depth {node.depth} after {test.context(node.prefix)!r}: adjusted p "
            f"{node.p_adjusted:.2g}, TV {node.tv:.2f}, over-represented {test.piece(node.over_represented)!r}"
        )
    if args.json:
        write_text(args.json, dumps(test, indent=1, ensure_ascii=False))
    if not args.no_report:
        from evalsuite.report.folder import report_folder
        from evalsuite.report.sampling import write_sampling_report

        reports_dir = (config.root / config.defaults.reports_dir) if config else Path("reports")
        folder = report_folder(reports_dir, f"{test.candidate.target}-sampling")
        paths = write_sampling_report(test, folder, created=time.time())
        print(f"report: {paths.markdown}\nreport: {paths.html}")
    return 0 if test.verdict.outcome == "SAME" else 1


def eval_sampling(args: argparse.Namespace, config: Config) -> SampleTest:
    """`eval TARGET --sampling`: the sample test with TARGET's sampling table (or built-in) settings.

    Eval's own flags that change what is sampled (--task, --limit) are not
    carried over: the sampling tasks are those where the model branches, set
    in the table, which may differ from the tasks eval grades.
    """
    from evalsuite.sampling.verdict import JudgeSettings

    return _draw_and_judge(args, config, {}, JudgeSettings())


def resolved_for(config: Config, args: argparse.Namespace, flags: dict[str, Any]) -> ResolvedSettings:
    """TARGET's sampling settings: each key from its flag, else the tables, else the built-in default."""
    from evalsuite.sampling.plan import resolve_settings

    base_name = getattr(args, "baseline", None) or config.target(args.target).baseline
    return resolve_settings(config, args.target, base_name, flags)


def _draw_and_judge(
    args: argparse.Namespace, config: Config, flags: dict[str, Any], judge_settings: JudgeSettings
) -> SampleTest:
    """Draw both arms (resuming what is stored), judge them, and print the verdict and the drafting seen."""
    from evalsuite.cli.common import progress_for, say_for
    from evalsuite.sampling.run import sample_test

    say = say_for(args)
    resolved = resolved_for(config, args, flags)
    say(_settings_line(resolved))
    say(_power_up_front(resolved.settings, judge_settings))
    test = sample_test(
        config,
        args.target,
        resolved.tasks,
        resolved.settings,
        judge_settings,
        baseline=getattr(args, "baseline", None),
        data=args.data,
        data_path=args.data_path,
        say=say,
        progress=progress_for(args),
    )
    test.verdict.notes.insert(0, _settings_line(resolved))
    _print_verdict(test)
    return test


def _print_verdict(test: SampleTest) -> None:
    print(test.verdict.sentence)
    speculation = test.candidate.speculation()
    if speculation:
        print(speculation)


def fold_into_report(test: SampleTest, folder: Path) -> None:
    """Write the sampling section next to an eval report and append its Markdown to report.md."""
    from evalsuite.report.sampling import write_sampling_report

    paths = write_sampling_report(test, folder, created=time.time())
    report = folder / "report.md"
    if report.exists():
        section = paths.markdown.read_text(encoding="utf-8")
        append_text(
            report, f"\n{section}\n(Also as [sampling.html](sampling.html) with plots, data in sampling.json.)\n"
        )
    print(f"report: {paths.html}")


def _settings_line(resolved: ResolvedSettings) -> str:
    """Which settings the draws use and where they came from (flags, a config table, the built-in defaults)."""
    s = resolved.settings
    origin = f"[{resolved.source}]" if resolved.source else "built-in defaults"
    if resolved.flags:
        origin += ", flags " + ", ".join(
            "--" + ("task" if k == "tasks" else k).replace("_", "-") for k in resolved.flags
        )
    top_k = "off" if not s.top_k else s.top_k
    return (
        f"sampling settings ({origin}): tasks {', '.join(resolved.tasks)}, {s.prompts} prompts each, {s.draws} "
        f"draws of {s.max_tokens} tokens, temperature {s.temperature:g}, top-p {s.top_p:g}, top-k {top_k}, "
        f"seed streams {s.seed} and {s.seed + 1}"
    )


def _power_up_front(settings: object, judge_settings: object) -> str:
    """Before any draw: what a node reached by every draw could reveal (roots, one test per prompt)."""
    from evalsuite.sampling.power import detectable_tv

    draws, prompts = settings.draws, settings.prompts  # type: ignore[attr-defined]
    alpha, power = judge_settings.alpha, judge_settings.power  # type: ignore[attr-defined]
    tv = detectable_tv(draws, draws, df=1, level=alpha / prompts, power=power)
    return (
        f"power: with {draws} draws per arm, a node every draw reaches reveals TV >= {tv:.3f} with {power:.0%} "
        f"power (level {alpha:g}/{prompts}, one degree of freedom); deeper nodes, more tests and more outcomes "
        "need more; the verdict restates it for the nodes actually tested."
    )


__all__ = ["add_parser", "eval_sampling", "fold_into_report", "run"]
