"""Speed of stored runs: decode tokens/s, TTFT, draft acceptance, and the paired speedup over a baseline."""

from evalsuite.speed.measure import RequestSpeed, request_speed
from evalsuite.speed.speedup import Speedup, paired_speedup, speedup
from evalsuite.speed.summary import SpeedSummary, counter_deltas, drafting_seen, speed_summary

__all__ = [
    "RequestSpeed",
    "SpeedSummary",
    "Speedup",
    "counter_deltas",
    "drafting_seen",
    "paired_speedup",
    "request_speed",
    "speed_summary",
    "speedup",
]
