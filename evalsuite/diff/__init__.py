"""Token-level diff of a candidate run against its baseline, and classification of divergences."""

from evalsuite.diff.align import SampleDiff, diff_completions, diff_runs
from evalsuite.diff.classify import (
    ALPHA,
    DEFAULT_CONTROL_SLACK,
    DEFAULT_NEAR_TIE_NATS,
    THIN_CEILING_NATS,
    ControlKind,
    ControlProfile,
    Evidence,
    Thresholds,
    calibrate,
    classify,
    classify_all,
    flip_bound,
)
from evalsuite.diff.resolution import LogitResolution, logit_resolution

__all__ = [
    "ALPHA",
    "DEFAULT_CONTROL_SLACK",
    "DEFAULT_NEAR_TIE_NATS",
    "THIN_CEILING_NATS",
    "ControlKind",
    "ControlProfile",
    "Evidence",
    "LogitResolution",
    "SampleDiff",
    "Thresholds",
    "calibrate",
    "classify",
    "classify_all",
    "diff_completions",
    "diff_runs",
    "flip_bound",
    "logit_resolution",
]
