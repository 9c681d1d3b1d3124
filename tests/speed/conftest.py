"""Speed tests reuse the stored-run builders of tests/report."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
