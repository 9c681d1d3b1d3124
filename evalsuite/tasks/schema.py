"""The task spec's schema: the pydantic models a task file (or an lm-eval selection) becomes.

Kept apart from loading (evalsuite/tasks/spec.py), which checks a spec against the graders and lm-eval:
those modules build and read specs themselves, so they import the models from here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class HFSource(BaseModel):
    """A Hugging Face hub dataset pinned to a revision."""

    model_config = ConfigDict(extra="forbid")
    path: str
    name: str | None = None
    split: str = "test"
    revision: str


class DataSources(BaseModel):
    """Where a task's rows can come from; which one is used is chosen per run."""

    model_config = ConfigDict(extra="forbid")
    hf: HFSource | None = None
    fixture: str | None = Field(None, description="file under fixtures/, a small real subset for tests")
    local: str | None = Field(None, description="default local JSONL/Parquet path for offline use")
    adapter: str | None = Field(
        None,
        description="adapter name in the evalsuite.task_adapters entry points (or a module path): "
        "prepare_rows(rows, options) run on every source's rows (decode, filter, derive fields), optionally "
        "load_hf(path, revision, options) for hub data `datasets` cannot load and, for code tasks, "
        "code_tests(reference, where); see evalsuite/tasks/adapters.py",
    )
    options: dict[str, Any] = Field(default_factory=dict, description="passed to the adapter; part of the identity")


class PromptSpec(BaseModel):
    """Jinja templates over a dataset row (the row's fields are the variables)."""

    model_config = ConfigDict(extra="forbid")
    system: str | None = None
    user: str


class GraderSpec(BaseModel):
    """Which grader scores a task, with its extraction steps and options."""

    model_config = ConfigDict(extra="forbid")
    name: str
    extraction: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)


class TaskSpec(BaseModel):
    """One task: dataset, prompt, reference, strata, grader and generation overrides."""

    model_config = ConfigDict(extra="forbid")
    name: str
    description: str = ""
    dataset: DataSources
    id_field: str | None = Field(None, description="row field with a stable id; default: the row index")
    id_prefix: str = ""
    reference_field: str
    strata: list[str] = Field(default_factory=list)
    prompt: PromptSpec
    grader: GraderSpec
    generation: dict[str, Any] = Field(default_factory=dict)
    equivalence_margin: float = Field(
        0.02, gt=0, lt=1, description="TOST margin (a proportion) declared before any run: 0.02 = 2 points"
    )
    metadata_fields: list[str] = Field(default_factory=list)
