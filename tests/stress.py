"""Run pytest several times in a row beside CPU burners and count the failures of each test (`make test-stress`).

A test that waits on the machine being fast passes alone and fails on a busy machine; this makes the machine
busy on purpose.  Each burner is a process spinning on one core for as long as the runs last.

    python tests/stress.py --runs 5 --burners 2 -- -n 2 -m "not rig"
    python tests/stress.py --runs 20 -- -n 2 tests/core/test_run_processes.py

Prints one line per run (its pytest summary) and, at the end, every test that failed with its count out of
the runs; exits 1 when any test failed in any run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

BURN = "while True: pass"


def failed_tests(junit: Path) -> list[str]:
    """The ids of the tests that failed or errored in one run's JUnit XML report (all of them when there is none)."""
    if not junit.exists():
        return ["(the run wrote no report)"]
    failed = []
    for case in ET.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="pytest runs in a row (default 5)")
    parser.add_argument("--burners", type=int, default=2, help="processes each spinning on a core (default 2)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: pytest's arguments")
    args = parser.parse_args()
    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    failures: Counter[str] = Counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(1, args.runs + 1):
                junit = Path(tmp) / f"run{run}.xml"
                started = time.monotonic()
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pytest",
                        "-q",
                        "-p",
                        "no:cacheprovider",
                        f"--junitxml={junit}",
                        *pytest_args,
                    ],
                    capture_output=True,
                    text=True,
                )
                lines = done.stdout.strip().splitlines()
                summary = lines[-1] if lines else f"pytest exited {done.returncode}"
                failed = failed_tests(junit) if done.returncode != 0 else []
                if done.returncode != 0 and not failed:  # no test failed, yet the run did (collection, a crash)
                    failed = [f"(the run itself: pytest exited {done.returncode})"]
                failures.update(failed)
                print(f"run {run}/{args.runs} ({time.monotonic() - started:.0f} s): {summary}", flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"{args.runs} runs beside {args.burners} CPU burners: {len(failures)} tests failed at least once")
    for test, count in failures.most_common():
        print(f"  {count}/{args.runs}  {test}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
