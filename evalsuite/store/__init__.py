"""The run store: append-only, crash-safe records of a run, keyed by sample id, with a typed manifest."""

from evalsuite.store.fingerprint import fingerprint
from evalsuite.store.manifest import MANIFEST_VERSION, FingerprintFields, RunManifest
from evalsuite.store.reader import MemoryRun, RunReader
from evalsuite.store.run import RunStore, open_run
from evalsuite.store.writer import RunWriter

__all__ = [
    "MANIFEST_VERSION",
    "FingerprintFields",
    "MemoryRun",
    "RunManifest",
    "RunReader",
    "RunStore",
    "RunWriter",
    "fingerprint",
    "open_run",
]
