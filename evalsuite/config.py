"""The project config (`evalsuite.toml`): targets, their baselines, and run defaults.

A target is one endpoint configuration: where it is, which engine serves it
(a name registered in the `evalsuite.engines` entry-point group), and which
target is its baseline.  API keys are named by environment
variable only; the key itself never enters a config, a run or a report.
"""

from __future__ import annotations

import os
import shlex
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from evalsuite import plugins
from evalsuite.errors import ConfigError, format_validation_error, reading
from evalsuite.folders import folder_name
from evalsuite.grid import Scalar, expand_targets
from evalsuite.records import GenerationParams


class ServeConfig(BaseModel):
    """A command that serves a target: `eval`/`run` start it on a free port, wait for health, stop it after.

    `command` is an argv list or one string (split like a shell would, no
    shell involved) with `{port}` where the port goes; `env` is added to the
    environment; `cwd` (relative to the config file's folder) is where it runs.
    """

    model_config = ConfigDict(extra="forbid")
    command: list[str] | str
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    health_path: str = "/health"
    startup_timeout_s: float = Field(600.0, gt=0)

    @field_validator("command")
    @classmethod
    def _has_port(cls, value: list[str] | str) -> list[str] | str:
        argv = shlex.split(value) if isinstance(value, str) else value
        if not argv:
            raise ValueError("is empty; give the server's command line")
        if not any("{port}" in a for a in argv):
            raise ValueError("needs a {port} placeholder where the server's port goes (e.g. --port {port})")
        return value

    def argv(self) -> list[str]:
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)


class SamplingDefaults(BaseModel):
    """`sample-test` settings for a target's model: where it branches (tasks), how to sample, how many draws.

    Whether a sampling test can see anything depends on the model: a model
    sure of every token on a task's prompts never branches there, and no
    number of draws tests a node nobody chose differently.  So the settings
    that make a model branch belong next to the model.  `sample-test TARGET`
    reads TARGET's table, else its baseline's; flags override each key.
    """

    model_config = ConfigDict(extra="forbid")
    tasks: list[str] | None = Field(None, min_length=1, description="tasks whose prompts are drawn from")
    prompts: int | None = Field(None, ge=1, description="prompts per task (the first ones of the dataset)")
    draws: int | None = Field(None, ge=2, description="draws per prompt and arm")
    tokens: int | None = Field(None, ge=1, le=512, description="tokens per draw")
    temperature: float | None = Field(None, gt=0, allow_inf_nan=False)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0, description="0 = no limit; 1 (greedy) is refused")

    @field_validator("top_k")
    @classmethod
    def _not_greedy(cls, value: int | None) -> int | None:
        if value == 1:
            raise ValueError("1 is greedy decoding, which never exercises sampling; use 0 (no limit) or above 1")
        return value


class TargetConfig(BaseModel):
    """One endpoint configuration."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""
    base_url: str | None = Field(None, description="OpenAI-compatible root, e.g. http://127.0.0.1:8080/v1")
    model: str | None = None
    engine: str = Field("openai", description="engine name from the evalsuite.engines entry points")
    api: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="extra JSON fields sent with every request")
    concurrency: int = Field(1, ge=1, le=512)
    timeout_s: float = Field(600.0, gt=0)
    max_retries: int = Field(5, ge=0, le=50)
    stream: bool = False
    max_response_mb: float = Field(
        64.0, gt=0, le=4096, description="cap on one response body, before and after decompression"
    )
    max_tokens: int | None = Field(None, ge=1, description="cap on the tasks' max_tokens (small-context servers)")
    baseline: str | None = None
    control: str | None = None
    rig: str | None = Field(None, description="reference-rig configuration that serves this target")
    rig_args: list[str] = Field(
        default_factory=list,
        description="server flags for a rig target: a flag its configuration passes takes this value, others are added",
    )
    serve: ServeConfig | None = Field(None, description="a command that serves this target (started by the suite)")
    allow_differences: list[str] = Field(
        default_factory=list,
        description="fingerprint fields this target differs in on purpose (e.g. server.model for a quantized target)",
    )
    description: str = ""
    sampling: SamplingDefaults | None = Field(None, description="sample-test settings for this target's model")
    _grid: tuple[str, dict[str, Scalar]] | None = PrivateAttr(None)

    @property
    def grid_point(self) -> tuple[str, dict[str, Scalar]] | None:
        """(grid table, parameter values) for a target a grid made (`evalsuite.grid`), else None."""
        return self._grid

    @field_validator("engine")
    @classmethod
    def _registered_engine(cls, value: str) -> str:
        """The engine list is whatever installed packages register, so a plugin's engine is valid too."""
        known = plugins.names(plugins.ENGINES)
        if value not in known:
            listed = ", ".join(map(repr, known)) or "none (reinstall evalsuite: pip install -e .)"
            raise ValueError(f"is not a registered engine; known engines: {listed}")
        return value

    @model_validator(mode="after")
    def _has_endpoint(self) -> TargetConfig:
        if self.serve is not None and (self.base_url or self.rig is not None):
            raise ValueError(
                "has serve and also base_url or rig; a served target gets its URL from the server it starts"
            )
        if self.rig is None and self.serve is None and not self.base_url:
            raise ValueError("needs base_url (or rig = '<rig configuration>', or a [serve] command)")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.rig_args and self.rig is None:
            raise ValueError(
                "has rig_args but no rig; rig_args change a rig configuration's command line (a serve command "
                "takes its flags in serve.command)"
            )
        return self

    def api_key(self) -> str | None:
        """The key from the environment; a named but unset variable is an error, not an empty key."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"Target '{self.name}' reads its API key from ${self.api_key_env}, which is not set. "
                f"Export it (the key is never written to a file or report)."
            )
        return value


class Defaults(BaseModel):
    """Run defaults; generation defaults are greedy and seeded."""

    model_config = ConfigDict(extra="forbid")
    runs_dir: str = "runs"
    reports_dir: str = "reports"
    tasks: list[str] = Field(default_factory=lambda: ["math500", "gsm8k", "livecodebench"], min_length=1)
    data: Literal["hf", "local", "fixture"] = "hf"
    limit: int | None = Field(
        None, ge=1, description="first N samples of each task when --limit is not given (`--limit all`: every one)"
    )
    max_tokens: int = Field(8192, ge=1)
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int | None = Field(1, ge=0)
    seed: int = Field(42, ge=0)
    top_logprobs: int = Field(5, ge=0, le=20)
    repeat_baseline: bool = Field(
        False, description="run the baseline twice in `eval`: the repeat shows whether the engine is deterministic"
    )
    sandbox: Literal["auto", "namespaces", "uid", "none"] = Field(
        "auto",
        description="isolation of model-written code: `auto` (the best this machine allows; refused where there is "
        "none), a level, or `none` to run it unisolated on purpose (see docs/sandbox.md)",
    )
    one_server_at_a_time: bool = Field(
        False,
        description="`speed` and `leaderboard` measure the baseline, then the candidate, on the same prompts, instead "
        "of both up together and interleaved (servers that cannot share the machine, e.g. one GPU)",
    )

    def params(self, overrides: dict[str, Any] | None = None) -> GenerationParams:
        values: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
            "top_logprobs": self.top_logprobs,
        }
        for key, value in (overrides or {}).items():
            if key not in values and key != "stop":
                raise ConfigError(f"Unknown generation override '{key}' (known: {', '.join(sorted(values))}, stop).")
            values[key] = tuple(value) if key == "stop" else value
        check_generation({k: v for k, v in values.items() if k != "stop"}, "generation parameters")
        return GenerationParams(**values)


def check_generation(values: dict[str, Any], source: str) -> None:
    """Refuse out-of-range generation parameters (max_tokens -5, top_p 2...) before anything is sent.

    The ranges are the `[defaults]` ones, so a task spec's `generation:`, a
    command-line override and the config are held to the same rules.
    """
    fields = Defaults.model_fields
    unknown = [k for k in values if k not in fields or k in _NOT_GENERATION]
    if unknown:
        known = ", ".join(k for k in fields if k not in _NOT_GENERATION)
        raise ConfigError(
            f"{source}: unknown generation key(s) {', '.join(map(repr, unknown))} (known: {known}, stop)."
        )
    try:
        Defaults.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


_NOT_GENERATION = frozenset(
    {"runs_dir", "reports_dir", "tasks", "data", "limit", "repeat_baseline", "one_server_at_a_time"}
)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: Defaults = Field(default_factory=lambda: Defaults.model_validate({}))
    targets: dict[str, TargetConfig] = Field(default_factory=dict)
    _path: Path | None = PrivateAttr(None)
    _grids: dict[str, dict[str, dict[str, Scalar]]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _expand_grids(cls, data: Any, handler: ModelWrapValidatorHandler[Config]) -> Config:
        """Grid tables become one target per point (`evalsuite.grid`) before the targets are validated."""
        grids: dict[str, dict[str, dict[str, Scalar]]] = {}
        if isinstance(data, dict) and isinstance(data.get("targets"), dict):
            targets, grids = expand_targets(data["targets"])
            data = {**data, "targets": targets}
        config = handler(data)
        config._grids = grids
        for block, points in grids.items():
            for name, values in points.items():
                config.targets[name]._grid = (block, values)
        return config

    @property
    def grids(self) -> dict[str, list[str]]:
        """Each grid table's name -> the names of the targets it expanded into, in order."""
        return {block: list(points) for block, points in self._grids.items()}

    @model_validator(mode="after")
    def _links(self) -> Config:
        folders: dict[str, str] = {}
        for name, target in self.targets.items():
            target.name = name
            taken = folders.setdefault(folder_name(name), name)
            if taken != name:
                raise ValueError(
                    f"targets.{taken} and targets.{name} would share the runs folder '{folder_name(name)}'; rename one"
                )
            for link in ("baseline", "control"):
                other = getattr(target, link)
                if other is not None and other not in self.targets:
                    raise ValueError(f"targets.{name}.{link} = {other!r} names no target")
                if other == name:
                    raise ValueError(
                        f"targets.{name}.{link} = {other!r} names the target itself; a target compared "
                        "with itself always looks lossless, so name another target"
                    )
            if target.control is not None and target.control == target.baseline:
                raise ValueError(
                    f"targets.{name}.control = {target.control!r} is also its baseline; the numerics "
                    "control must be another target (the speculative server drafting for itself)"
                )
        return self

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def root(self) -> Path:
        return self._path.parent if self._path else Path.cwd()

    def target(self, name: str) -> TargetConfig:
        try:
            return self.targets[name]
        except KeyError:
            where = self.path or "the config"
            if name in self._grids:
                points = list(self._grids[name])
                raise ConfigError(
                    f"'{name}' in {where} is a grid of {len(points)} targets: {', '.join(points)}. Name one (quote "
                    f"it in a shell: '{points[0]}'), or rank them all with `evalsuite leaderboard {name}`."
                ) from None
            known = ", ".join(sorted(self.targets)) or "none"
            raise ConfigError(f"No target named '{name}' in {where}. Targets: {known}.") from None


def load_config(path: str | Path | None = None) -> Config:
    """Read the config: `path` (`--config`), else `evalsuite.toml` in the current folder.

    Errors name file, key and value; a missing file says how to get one
    (`evalsuite init`), since that is the first thing a new user meets.
    """
    file = Path(path) if path else Path.cwd() / "evalsuite.toml"
    if not file.exists() and path:
        raise ConfigError(f"Config file {file} (--config) does not exist. Check the path, or run `evalsuite init`.")
    if not file.exists():
        raise ConfigError(
            f"No evalsuite.toml in {file.parent}. Run `evalsuite init` to write one here (then edit its targets' "
            "base_url), or pass --config PATH."
        )
    with reading(file):
        text = file.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}.") from None
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, str(file))) from None
    config._path = file.resolve()
    return config
