"""`evalsuite leaderboard`: several speculative configurations against one baseline, ranked.

Which configuration (a draft length, a drafter, an n-gram setting) is fastest
among those that are lossless?  `run_leaderboard` runs the shared baseline,
its repeat and each control once, each candidate's accuracy and token-level
comparison and its speed run, and writes `leaderboard.md`, `leaderboard.html`
and `leaderboard.csv` to `reports/leaderboard/<timestamp>/` (`docs/leaderboard.md`).
"""

from evalsuite.leaderboard.render import CSV_COLUMNS, LeaderboardPaths, summary_line
from evalsuite.leaderboard.rows import Row
from evalsuite.leaderboard.run import Leaderboard, LeaderboardOptions, resolve, run_leaderboard

__all__ = [
    "CSV_COLUMNS",
    "Leaderboard",
    "LeaderboardOptions",
    "LeaderboardPaths",
    "Row",
    "resolve",
    "run_leaderboard",
    "summary_line",
]
