"""A multi-turn workload: a session whose every turn holds the earlier turns and the model's own answers.

An iterative coding session is where lookup drafters shine: asked to change
its code, a model writes most of it again, so its own earlier answers are
the best draft there is.  A session file is JSON:

    {"name": "coding", "description": "...", "system": "...", "turns": ["first request", "second", ...]}

Only the user's turns are written down; each arm answers them in order, fed
its own history (its own earlier answers), as a user of that server would be.
Greedy identity is then judged turn by turn: while both arms' answers agree,
their histories agree and the next turn is the same prompt on both; the first
turn whose answers differ is where the histories part, and later turns are
different prompts (`parting`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsuite.errors import ConfigError, DatasetError, reading
from evalsuite.tasks.data import fixture_file
from evalsuite.tasks.packaged import packaged_fixtures

SESSIONS = "sessions"
"""The fixture folder of shipped sessions (`fixtures/sessions/NAME.json`)."""


@dataclass(frozen=True)
class Session:
    """A session's user turns (and system prompt), read from its file."""

    name: str
    turns: tuple[str, ...]
    system: str = ""
    source: str = ""

    def messages(self, history: Sequence[dict[str, str]], turn: int) -> tuple[dict[str, str], ...]:
        """The request of turn `turn`: the system prompt, the history so far, the turn's own words."""
        system = ({"role": "system", "content": self.system},) if self.system else ()
        return (*system, *history, {"role": "user", "content": self.turns[turn]})


def load_session(spec: str, root: Path, turns: int | None = None) -> Session:
    """A session by name (`fixtures/sessions/NAME.json` next to the config, else the packaged one) or by path;
    `turns` keeps the first N turns."""
    path = Path(spec).expanduser()
    if not (spec.endswith(".json") or "/" in spec):
        try:
            path = fixture_file(f"{SESSIONS}/{spec}.json", root)
        except DatasetError:
            shipped = sorted(p.stem for p in (packaged_fixtures() / SESSIONS).glob("*.json"))
            raise ConfigError(
                f"Unknown session '{spec}': no {SESSIONS}/{spec}.json in {root / 'fixtures'} or the packaged "
                f"fixtures (shipped: {', '.join(shipped) or 'none'}); give a name or a path to a session file."
            ) from None
    with reading(path):
        text = path.read_text(encoding="utf-8")
    try:
        raw: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"Session file {path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    listed = raw.get("turns") if isinstance(raw, dict) else None
    if not isinstance(listed, list) or not listed or not all(isinstance(t, str) and t.strip() for t in listed):
        raise ConfigError(
            f"Session file {path}: 'turns' must be a non-empty list of non-empty strings (the user's turns)."
        )
    system = raw.get("system", "")
    if not isinstance(system, str):
        raise ConfigError(f"Session file {path}: 'system' must be a string, got {type(system).__name__}.")
    if turns is not None and turns < 1:
        raise ConfigError(f"--session-turns must be at least 1, got {turns}.")
    kept = tuple(listed[:turns] if turns else listed)
    return Session(str(raw.get("name") or path.stem), kept, system, str(path))


TURN_PREFIX = "turn-"


def turn_workload(turn: int) -> str:
    """The workload name of a session turn in the speed figures (`turn-1`, `turn-2`, ...)."""
    return f"{TURN_PREFIX}{turn + 1}"


def parting(texts: dict[str, dict[int, dict[int, str]]]) -> list[dict[str, Any]]:
    """Per repetition: the first turn whose answers differ, where in the answer, and what each arm wrote there.

    `texts` is arm -> rep -> turn -> answer.  A repetition whose arms agree on
    every turn both answered says so (`turn` None).
    """
    base, cand = texts.get("baseline", {}), texts.get("candidate", {})
    out = []
    for rep in sorted(base.keys() & cand.keys()):
        turns = sorted(base[rep].keys() & cand[rep].keys())
        entry: dict[str, Any] = {"rep": rep, "turn": None, "identical_turns": 0, "turns": len(turns)}
        for turn in turns:
            a, b = base[rep][turn], cand[rep][turn]
            if a == b:
                entry["identical_turns"] += 1
                continue
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            entry.update(
                turn=turn + 1,
                offset=at,
                before=a[max(0, at - 40) : at],
                baseline=a[at : at + 40],
                candidate=b[at : at + 40],
            )
            break
        out.append(entry)
    return out


def parting_sentence(entry: dict[str, Any]) -> str:
    """One line of the report for one repetition's `parting` entry."""
    if entry["turn"] is None:
        return (
            f"rep {entry['rep']}: the answers are identical on all {entry['turns']} turns, so the histories never part"
        )
    same = "turn 1" if entry["turn"] == 2 else f"turns 1-{entry['turn'] - 1}"
    return (
        f"rep {entry['rep']}: identical on {same}; at turn {entry['turn']} the answers part at "
        f"character {entry['offset']} (after {entry['before']!r}: baseline {entry['baseline']!r}, candidate "
        f"{entry['candidate']!r}), so from turn {entry['turn'] + 1} on each arm answers its own, different history"
        if entry["turn"] > 1
        else f"rep {entry['rep']}: the answers part at turn 1, character {entry['offset']} (after {entry['before']!r}: "
        f"baseline {entry['baseline']!r}, candidate {entry['candidate']!r}); every later turn has its own history"
    )
