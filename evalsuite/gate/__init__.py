"""The pytest gate: every sample of a stored (or freshly run) comparison becomes a test item.

Load it with `-p evalsuite.gate.plugin` (or through its `pytest11` entry
point) and pass `--evalsuite-run DIR` or `--evalsuite-target NAME`.  The
plugin module imports nothing heavy until one of those options is given.
"""
