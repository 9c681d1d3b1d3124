"""The sample-test report section: verdict, power, per-node table and two plots (Markdown and HTML).

Additive to the comparison report: its own templates (`sampling.md.j2`,
`sampling.html.j2`) over a plain dict of rows, so it can be rendered alone by
`evalsuite sample-test` or included by a larger report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from evalsuite.report.render import _env, _static
from evalsuite.report.svg import PALETTE, Scale, Svg
from evalsuite.sampling.run import SampleTest
from evalsuite.serialize import dumps, to_jsonable
from evalsuite.textfile import write_text

TOP_TOKENS = 4  # outcomes shown per node in the table
TABLE_ROWS = 40


@dataclass(frozen=True)
class SamplingPaths:
    markdown: Path
    html: Path
    json: Path


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def node_rows(test: SampleTest, limit: int = TABLE_ROWS) -> list[dict[str, Any]]:
    """The nodes, most significant first: context, both arms' counts of the top outcomes, p-values, TVs."""
    rows = []
    for n in sorted(test.verdict.nodes, key=lambda n: (n.p_adjusted, n.prompt_id, n.depth))[:limit]:
        t = n.test
        order = sorted(range(len(t.outcomes)), key=lambda i: -(t.a[i] + t.b[i]))[:TOP_TOKENS]
        counts = ", ".join(f"{test.piece(t.outcomes[i])!r} {t.a[i]}/{t.b[i]}" for i in order)
        rows.append(
            {
                "prompt": n.prompt_id,
                "depth": n.depth,
                "context": test.context(n.prefix) or "(start)",
                "counts": counts,
                "n_a": t.n_a,
                "n_b": t.n_b,
                "df": t.df,
                "p": n.test.p,
                "p_adj": n.p_adjusted,
                "tv": n.tv,
                "detectable": n.detectable_tv,
                "over": test.piece(n.over_represented),
                "differs": n.p_adjusted < test.verdict.settings.alpha,
            }
        )
    return rows


def pvalue_plot(test: SampleTest) -> Markup | None:
    """-log10 of each node's Holm-adjusted p-value, by prompt and depth, with the alpha line."""
    nodes = sorted(test.verdict.nodes, key=lambda n: (n.prompt_id, n.depth, n.prefix))
    if not nodes:
        return None
    alpha = test.verdict.settings.alpha
    values = [-math.log10(max(n.p_adjusted, 1e-300)) for n in nodes]
    top = max(max(values), -math.log10(alpha)) * 1.1 + 0.1
    left, right, top_px, bottom = 60, 620, 30, 230
    x = Scale(0, max(len(nodes) - 1, 1), left + 6, right - 6)
    y = Scale(0, top, bottom, top_px)
    svg = Svg(right + 20, bottom + 50, "Holm-adjusted p-value of each tested node", "sampling-pvalues")
    svg.text(left, 16, "Holm-adjusted p-value per node (higher = more different)", size=12, weight="bold")
    svg.y_axis(y, left, right, "-log10 adjusted p")
    svg.line(left, bottom, right, bottom)
    svg.text((left + right) / 2, bottom + 30, "nodes, by prompt then depth", "middle", 11, PALETTE["axis"])
    line = y(-math.log10(alpha))
    svg.line(left, line, right, line, PALETTE["confident"], 1, "4 3")
    svg.text(right, line - 4, f"alpha {alpha:g}", "end", 10, PALETTE["confident"])
    for i, (n, v) in enumerate(zip(nodes, values)):
        color = PALETTE["confident"] if n.p_adjusted < alpha else PALETTE["baseline"]
        tip = f"{n.prompt_id} depth {n.depth} {test.context(n.prefix)!r}: adjusted p {n.p_adjusted:.3g}, TV {n.tv:.2f}"
        svg.circle(x(i), y(v), 3, color, tip)
    return svg.markup()


def distribution_plot(test: SampleTest, nodes: int = 3) -> Markup | None:
    """Both arms' next-token frequencies at the most different nodes (paired bars)."""
    chosen = sorted(test.verdict.nodes, key=lambda n: n.p_adjusted)[:nodes]
    if not chosen:
        return None
    left, width, panel = 60, 620, 150
    svg = Svg(
        width + 20,
        30 + panel * len(chosen),
        "Next-token frequencies at the most different nodes",
        "sampling-distributions",
    )
    svg.text(left, 16, "Next-token frequencies at the most different nodes", size=12, weight="bold")
    svg.legend(width - 220, 16, [("baseline", PALETTE["baseline"]), ("candidate", PALETTE["candidate"])])
    for j, n in enumerate(chosen):
        t = n.test
        base_y, top_y = 30 + panel * j + panel - 40, 30 + panel * j + 24
        order = sorted(range(len(t.outcomes)), key=lambda i: -(t.a[i] + t.b[i]))[:8]
        y = Scale(0, 1, base_y, top_y)
        svg.text(
            left,
            top_y - 8,
            _short(
                f"{n.prompt_id} depth {n.depth}: {test.context(n.prefix) or '(start)'} (adjusted p {n.p_adjusted:.2g})",
                90,
            ),
            size=10,
        )
        svg.y_axis(y, left, width, "share")
        slot = (width - left) / max(len(order), 1)
        for k, i in enumerate(order):
            x0 = left + slot * k + slot * 0.15
            for arm, (count, total, color) in enumerate(
                ((t.a[i], t.n_a, PALETTE["baseline"]), (t.b[i], t.n_b, PALETTE["candidate"]))
            ):
                share = count / total if total else 0
                svg.rect(
                    x0 + arm * slot * 0.35,
                    y(share),
                    slot * 0.33,
                    base_y - y(share),
                    color,
                    f"{'baseline' if arm == 0 else 'candidate'}: {count}/{total}",
                )
            svg.text(x0 + slot * 0.35, base_y + 12, _short(repr(test.piece(t.outcomes[i])), 14), "middle", 9)
    return svg.markup()


def context(test: SampleTest, created: float) -> dict[str, Any]:
    v = test.verdict
    s = v.settings
    return {
        "verdict": v,
        "settings": s,
        "rows": node_rows(test),
        "more": max(len(v.nodes) - TABLE_ROWS, 0),
        "baseline": test.baseline,
        "candidate": test.candidate,
        "created": created,
        "prompts": {k: _short(p, 100) for k, p in test.prompts.items()},
        "detectable": "n/a" if not math.isfinite(v.detectable) else f"{v.detectable:.3f}",
        "params": (test.baseline.manifests[0].fields.params.as_mapping() if test.baseline.manifests else {}),
    }


def write_sampling_report(test: SampleTest, folder: Path, *, created: float) -> SamplingPaths:
    """Write sampling.md, sampling.html (self-contained, inline SVG) and sampling.json into `folder`."""
    ctx = context(test, created)
    md = _env("md").get_template("sampling.md.j2").render(**ctx)
    html = (
        _env("html")
        .get_template("sampling.html.j2")
        .render(
            **ctx, css=Markup(_static("report.css")), pvalues=pvalue_plot(test), distributions=distribution_plot(test)
        )
    )
    paths = SamplingPaths(folder / "sampling.md", folder / "sampling.html", folder / "sampling.json")
    write_text(paths.markdown, md)
    write_text(paths.html, html)
    write_text(paths.json, dumps({"schema": 1, **to_jsonable(test)}, indent=1, ensure_ascii=False))
    return paths
