"""`evalsuite compare`: diff, statistics and verdicts over stored runs, as JSON and pandas frames."""

from evalsuite.compare.accuracy import AccuracyRow, HolmFamily, accuracy_rows
from evalsuite.compare.comparable import MUST_MATCH, FieldDifference, check_comparable, field_differences
from evalsuite.compare.roles import CONTROL_ROLES, ROLES, control_roles
from evalsuite.compare.run import SCHEMA_VERSION, Comparison, RunLike, compare_roles, compare_runs
from evalsuite.compare.speed import ComparisonSpeed

__all__ = [
    "CONTROL_ROLES",
    "MUST_MATCH",
    "ROLES",
    "SCHEMA_VERSION",
    "AccuracyRow",
    "Comparison",
    "ComparisonSpeed",
    "FieldDifference",
    "HolmFamily",
    "RunLike",
    "accuracy_rows",
    "check_comparable",
    "compare_roles",
    "compare_runs",
    "control_roles",
    "field_differences",
]
