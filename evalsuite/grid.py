"""Grid targets: one target table with parameter lists becomes one named target per combination.

    [targets.dflash-n]
    rig = "smollm2-dflash"
    rig_args = ["--spec-draft-n-max", "{n_max}"]
    grid.n_max = [1, 2, 3, 4]

expands into `dflash-n[n_max=1]` ... `dflash-n[n_max=4]`, each an ordinary
target that every command accepts.  Every string of the table (the serve
command, its environment, `rig_args`, `extra`, `base_url`, ...) has each
`{name}` of the grid replaced by the point's value; inside `extra` (the JSON
sent with each request) a string that is only a placeholder takes the value
with its type, so `"speculative.n_max" = "{n_max}"` sends a number.  Several
lists give their product, in the order declared.  `{port}` stays for the
server's port; other braces (a JSON argument) are left alone.

Errors name the table, the key and the value: a grid that is not a table of
non-empty lists of plain values, a placeholder the grid does not declare, a
declared parameter that no value uses (every point would be the same target).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

GRID_KEY = "grid"
MAX_POINTS = 256
RESERVED = frozenset({"port"})
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE_TEXT = re.compile(r"^[A-Za-z0-9._+:@/-]+$")
"""What a value may look like in a target name: no brackets, commas, '=' or spaces, which would make names ambiguous."""

Scalar = str | int | float | bool


def value_text(value: Scalar) -> str:
    """A grid value as it appears in a target's name (TOML's spelling for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return format(value, "g") if isinstance(value, float) else str(value)


def point_name(block: str, values: dict[str, Scalar]) -> str:
    """`block[k=v,k2=v2]`: the name of one point of a grid."""
    return f"{block}[" + ",".join(f"{k}={value_text(v)}" for k, v in values.items()) + "]"


def expand_targets(targets: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, dict[str, Scalar]]]]:
    """(targets with every grid table expanded, {block: {point name: values}}); raises ValueError naming the key."""
    out: dict[str, Any] = {}
    grids: dict[str, dict[str, dict[str, Scalar]]] = {}
    for block, table in targets.items():
        if not isinstance(table, dict) or GRID_KEY not in table:
            out[block] = table
            continue
        params = _params(block, table[GRID_KEY])
        _check_placeholders(block, table, params)
        body = {k: v for k, v in table.items() if k != GRID_KEY}
        points: dict[str, dict[str, Scalar]] = {}
        for combo in itertools.product(*params.values()):
            values = dict(zip(params, combo))
            name = point_name(block, values)
            if name in targets:
                raise ValueError(f"targets.{name} is defined twice: as a table and by targets.{block}.{GRID_KEY}")
            points[name] = values
            out[name] = _substitute(body, values, typed=False)
        grids[block] = points
    return out, grids


def _params(block: str, grid: Any) -> dict[str, list[Scalar]]:
    key = f"targets.{block}.{GRID_KEY}"
    if not isinstance(grid, dict) or not grid:
        raise ValueError(f"{key} = {grid!r}: expected a table of parameter lists, e.g. {GRID_KEY}.n_max = [2, 4, 8]")
    params: dict[str, list[Scalar]] = {}
    for name, values in grid.items():
        where = f"{key}.{name}"
        if not _NAME.match(name) or name in RESERVED:
            raise ValueError(
                f"{where}: '{name}' cannot name a grid parameter (a letter or _ then letters, digits or _; "
                f"not {', '.join(sorted(RESERVED))}, which the suite fills in)"
            )
        if not isinstance(values, list) or not values:
            raise ValueError(f"{where} = {values!r}: expected a non-empty list of values, e.g. [2, 4, 8]")
        for value in values:
            if isinstance(value, (dict, list)) or not isinstance(value, (str, int, float, bool)):
                raise ValueError(f"{where} = {values!r}: {value!r} is not a plain value (a string, number or boolean)")
            if not _VALUE_TEXT.match(value_text(value)):
                raise ValueError(
                    f"{where} = {values!r}: {value!r} cannot be part of a target name (letters, digits and "
                    "._+:@/- only; no spaces, brackets, commas or '=')"
                )
        texts = [value_text(v) for v in values]
        if len(set(texts)) != len(texts):
            raise ValueError(f"{where} = {values!r}: a value is listed twice")
        params[name] = list(values)
    points = 1
    for values in params.values():
        points *= len(values)
    if points > MAX_POINTS:
        raise ValueError(f"{key} makes {points} targets (more than {MAX_POINTS}); split it into smaller grids")
    return params


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(key path, string) for every string inside a table's value."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _check_placeholders(block: str, table: dict[str, Any], params: dict[str, list[Scalar]]) -> None:
    used: set[str] = set()
    for path, text in _strings({k: v for k, v in table.items() if k != GRID_KEY}, f"targets.{block}"):
        for name in PLACEHOLDER.findall(text):
            if name in RESERVED:
                continue
            if name not in params:
                raise ValueError(
                    f"{path} = {text!r}: {{{name}}} is not a parameter of targets.{block}.{GRID_KEY} "
                    f"(it declares {', '.join(params)})"
                )
            used.add(name)
    for name in params:
        if name not in used:
            raise ValueError(
                f"targets.{block}.{GRID_KEY}.{name} is declared but no value of the table uses {{{name}}}, so every "
                "point would be the same target; put it where it belongs (serve.command, rig_args, extra...)"
            )


def _substitute(value: Any, values: dict[str, Scalar], *, typed: bool, key: str = "") -> Any:
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if typed and whole and whole.group(1) in values:
            return values[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: value_text(values[m.group(1)]) if m.group(1) in values else m.group(0), value)
    if isinstance(value, dict):
        return {k: _substitute(v, values, typed=typed or (key == "" and k == "extra"), key=k) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, values, typed=typed, key=key) for v in value]
    return value
