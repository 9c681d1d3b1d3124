"""`evalsuite compare`: diff, statistics and verdicts over stored runs, as JSON and pandas frames."""

from evalsuite.compare.accuracy import AccuracyRow, accuracy_rows, readjust
from evalsuite.compare.comparable import MUST_MATCH, FieldDifference, check_comparable, field_differences
from evalsuite.compare.run import SCHEMA_VERSION, Comparison, RunLike, compare_runs

__all__ = [
    "MUST_MATCH",
    "SCHEMA_VERSION",
    "AccuracyRow",
    "Comparison",
    "FieldDifference",
    "RunLike",
    "accuracy_rows",
    "check_comparable",
    "compare_runs",
    "field_differences",
    "readjust",
]
