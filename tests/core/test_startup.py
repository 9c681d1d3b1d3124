"""What starting the CLI costs: every command imports `evalsuite.cli.commands`, so the
heavy libraries only some commands use (pandas for frames, scipy for statistics, the
graders' sympy, datasets and lm-eval) must wait until a command asks for them.  pandas
alone was two fifths of a run's start-up CPU."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pandas", "pyarrow", "scipy", "sympy", "math_verify", "datasets", "lm_eval", "torch", "matplotlib")


def test_the_cli_imports_no_heavy_library_before_a_command_needs_it() -> None:
    probe = (
        "import json, sys\n"
        "import evalsuite.cli.commands\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []

