"""The run manifest: what produced a run, as a typed and versioned record.

The manifest is the one contract between run, grade, compare, gate and
report, so every reader uses these attributes instead of string keys.
`fingerprint_fields` is what the fingerprint hashes and what comparability
checks field by field; its parts name the fields the suite reads and keep
engine-specific keys (a server's probe, a dialect's extras) as recorded.

Versions (`schema_version`; a manifest without one is version 1):

1. the plain dict written up to evalsuite 0.1, with a `role` nothing read;
2. `schema_version` added, `role` gone (roles belong to a comparison, not to a run folder);
3. `store_layout` added: how `records.sqlite` stores token columns (`store.database`); runs before it are 1.

An older manifest is migrated step by step on reading (`MIGRATIONS`), never
rewritten on disk; a newer one, or one with keys this version does not know,
is refused with a sentence naming the version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalsuite.errors import StoreError, describe_read_error, format_validation_error
from evalsuite.serialize import dumps
from evalsuite.store.database import STORE_LAYOUT

MANIFEST = "manifest.json"
MANIFEST_VERSION = 3
REQUIRED_KEYS = ("fingerprint", "target", "task")  # what listing, grading and reports need; comparing checks more


class _Part(BaseModel):
    """A nested part: the fields the suite reads are typed, other keys are kept as recorded."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def as_mapping(self) -> dict[str, Any]:
        """The part as it is on disk (absent keys stay absent, keys sorted), for comparison and display."""
        return _sorted(self.model_dump(mode="python", exclude_unset=True))


def _sorted(value: Any) -> Any:
    """Mappings with their keys in order at every level, as the manifest file writes them."""
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


class EndpointIdentity(_Part):
    """Where the requests went: a URL, a rig configuration with its flags, or a serve command."""

    base_url: str | None = None
    rig: str | None = None
    server_args: list[str] | None = None
    serve: list[str] | None = None
    model_files: dict[str, str] | None = None  # file name: "sha256:<hex>" of each model file the server read


class EngineIdentity(_Part):
    """The request dialect, the API flavour and the extra JSON fields sent with every request."""

    dialect: str | None = None
    api: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class DatasetRevision(_Part):
    """What pins the data: where it came from and its revision (hub revision or sha256 of the file)."""

    source: str | None = None
    location: str | None = None
    revision: str | None = None


class ParamsRecord(_Part):
    """The generation parameters sent with every request."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    n: int | None = None
    top_logprobs: int | None = None
    stop: list[str] | None = None


class ServerIdentity(_Part):
    """What the server said about itself (the probe); keys beyond these depend on the engine.

    Values are kept as the server reported them (a build may be a number), so no
    server's answer can make a stored run unreadable.
    """

    model: Any = None
    build_info: Any = None
    version: Any = None
    dialect: Any = None


class FingerprintFields(_Part):
    """Everything that changes outputs; the fingerprint is the hash of exactly these fields as written."""

    suite_version: str | None = None
    target: str | None = None
    endpoint: EndpointIdentity = Field(default_factory=EndpointIdentity)
    server: ServerIdentity = Field(default_factory=ServerIdentity)
    engine: EngineIdentity = Field(default_factory=EngineIdentity)
    task: str | None = None
    prompt_template: str | None = None
    params: ParamsRecord = Field(default_factory=ParamsRecord)
    dataset: DatasetRevision = Field(default_factory=DatasetRevision)
    repeat: int = 0  # 1 = the same run again (a determinism control); absent for a first run


class TargetRecord(_Part):
    """The target's configuration when the run was made (an API key's variable name, never the key)."""

    name: str | None = None
    baseline: str | None = None
    control: str | None = None
    allow_differences: list[str] = Field(default_factory=list)


class RunManifest(BaseModel):
    """What produced a run: identity, fingerprint fields, target configuration, server probe, grader, host."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = MANIFEST_VERSION
    store_layout: int = STORE_LAYOUT
    fingerprint: str = Field(min_length=1)
    target: str = Field(min_length=1)
    task: str = Field(min_length=1)
    fingerprint_fields: FingerprintFields | None = None
    created_at: float | None = None
    suite_version: str | None = None
    target_config: TargetRecord = Field(default_factory=TargetRecord)
    probe: ServerIdentity = Field(default_factory=ServerIdentity)
    server_args: list[str] | None = None
    grader: dict[str, Any] | None = None
    strata: list[str] = Field(default_factory=list)
    host: dict[str, str] = Field(default_factory=dict)

    @property
    def fields(self) -> FingerprintFields:
        """The fingerprint fields, empty where the manifest records none (a check that needs them reads
        `fingerprint_fields` and says so)."""
        return self.fingerprint_fields or FingerprintFields()

    @property
    def name(self) -> str:
        """`target/task fingerprint16`, how messages name a run."""
        return f"{self.target}/{self.task} {self.fingerprint[:16]}"

    def __json__(self) -> dict[str, Any]:
        """As recorded (absent keys stay absent, so a fingerprint's fields keep their hash), with its version and
        store layout."""
        return {
            **self.model_dump(mode="python", exclude_unset=True),
            "schema_version": self.schema_version,
            "store_layout": self.store_layout,
        }

    def to_json(self) -> str:
        return dumps(self, indent=2, sort_keys=True)

    @classmethod
    def load(cls, raw: Any, source: str = "the manifest") -> RunManifest:
        """Validate a manifest of any known version, migrating older ones; `source` names it in errors."""
        if not isinstance(raw, Mapping):
            raise StoreError(f"{source} must hold a JSON object, not {type(raw).__name__}.")
        data = migrate(dict(raw), source)
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise StoreError(
                f"{source} has key(s) {', '.join(unknown)} that manifest schema {MANIFEST_VERSION} does not know; "
                "it was written by a newer evalsuite, or edited."
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise StoreError(format_validation_error(exc, source)) from None


def migrate_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 dropped `role`: it was written by `run --role` and read by nothing."""
    return {k: v for k, v in data.items() if k != "role"}


def migrate_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 records the store layout; every run before it was written in layout 1."""
    return {**data, "store_layout": 1}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: migrate_v1_to_v2, 2: migrate_v2_to_v3}
"""`MIGRATIONS[n]` turns a version-n manifest into a version n+1 one."""


def migrate(data: dict[str, Any], source: str = "the manifest") -> dict[str, Any]:
    """A manifest of any known version as the current version's dict (the input is not changed)."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreError(f"{source}: schema_version = {version!r} should be a whole number from 1 up.")
    if version > MANIFEST_VERSION:
        raise StoreError(
            f"{source} was written with manifest schema {version} by a newer evalsuite; this evalsuite reads "
            f"schemas 1 to {MANIFEST_VERSION}. Upgrade evalsuite to read it."
        )
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise StoreError(
            f"{source} lacks the key(s) {', '.join(missing)}; it was not written by `evalsuite run`, or it was edited."
        )
    wrong = [k for k in REQUIRED_KEYS if not isinstance(data[k], str) or not data[k]]
    if wrong:
        raise StoreError(f"{source}: {', '.join(f'{k} = {data[k]!r}' for k in wrong)} should be a non-empty string.")
    while version < MANIFEST_VERSION:
        data = MIGRATIONS[version](data)
        version += 1
    return {**data, "schema_version": version}


def read_manifest(path: Path) -> RunManifest:
    """A run folder's manifest file: not JSON, not an object, or not a manifest is a StoreError naming it."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(describe_read_error(path, exc)) from None
    return RunManifest.load(raw, str(path))


def write_manifest(path: Path, manifest: RunManifest) -> None:
    """Write the manifest whole or not at all (a temporary file renamed over it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(manifest.to_json(), encoding="utf-8")
    tmp.replace(path)


def as_manifest(manifest: RunManifest | Mapping[str, Any], source: str = "the manifest") -> RunManifest:
    """A manifest as the typed record; its plain-data form (any known version) is validated and migrated."""
    return manifest if isinstance(manifest, RunManifest) else RunManifest.load(manifest, source)
