"""The run store: append-only, crash-safe records of a run, keyed by sample id."""

from evalsuite.store.fingerprint import fingerprint
from evalsuite.store.run import RunStore, RunWriter, open_run

__all__ = ["RunStore", "RunWriter", "fingerprint", "open_run"]
