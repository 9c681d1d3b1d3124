"""The pytest gate: every sample of a stored (or freshly run) comparison becomes a test item.

Installing evalsuite registers it (the `pytest11` entry point); pass
`--evalsuite-run DIR` or `--evalsuite-target NAME` to use it.  The
plugin module imports nothing heavy until one of those options is given.
"""
