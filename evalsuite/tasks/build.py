"""Turn dataset rows into Samples: stable ids, strata, reference and rendered prompt."""

from __future__ import annotations

import hashlib
from typing import Any

import jinja2

from evalsuite.errors import DatasetError
from evalsuite.records import Sample
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.packaged import data_root, packaged_tasks
from evalsuite.tasks.schema import TaskSpec
from evalsuite.tasks.spec import load_task_spec

_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)


def prompt_template_digest(spec: TaskSpec) -> str:
    """A short hash of the prompt templates: part of the run fingerprint."""
    text = f"{spec.prompt.system or ''}\x00{spec.prompt.user}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _render(template: jinja2.Template, row: dict[str, Any], where: str) -> str:
    try:
        return template.render(**row).strip()
    except jinja2.UndefinedError as exc:
        raise DatasetError(f"{where}: the prompt template uses a field the row lacks ({exc.message}).") from None
    except Exception as exc:  # a filter or expression failing on this row's values (TypeError, ZeroDivision...)
        raise DatasetError(f"{where}: the prompt template fails on this row ({type(exc).__name__}: {exc}).") from None


def build_samples(spec: TaskSpec, rows: list[dict[str, Any]], *, source: str = "dataset") -> list[Sample]:
    """Samples in dataset order, every prompt rendered now (before any request is sent).

    Duplicate ids, missing fields and templates that fail on a row are
    errors naming the row.
    """
    if spec.dataset.adapter is not None:  # an adapter that builds its own prompts (lm-eval) builds its samples
        from evalsuite.tasks.adapters import find_adapter

        adapter = find_adapter(spec.dataset.adapter)
        if callable(getattr(adapter, "build_samples", None)):
            return adapter.build_samples(spec, rows, source=source)
    try:
        system = _ENV.from_string(spec.prompt.system) if spec.prompt.system else None
        user = _ENV.from_string(spec.prompt.user)
    except jinja2.TemplateError as exc:
        raise DatasetError(f"Task '{spec.name}': the prompt template is not valid Jinja ({exc}).") from None
    samples: list[Sample] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        where = f"{source}, row {index + 1}"
        if spec.id_field is not None and spec.id_field not in row:
            raise DatasetError(f"{where}: missing id field '{spec.id_field}'.")
        if spec.reference_field not in row:
            raise DatasetError(f"{where}: missing reference field '{spec.reference_field}'.")
        missing = [f for f in spec.strata if f not in row]
        if missing:
            raise DatasetError(f"{where}: missing strata field(s) {', '.join(missing)}.")
        sid = spec.id_prefix + (str(row[spec.id_field]) if spec.id_field else str(index))
        if sid in seen:
            raise DatasetError(f"{where}: duplicate sample id '{sid}'.")
        seen.add(sid)
        messages = []
        if system is not None:
            messages.append({"role": "system", "content": _render(system, row, where)})
        messages.append({"role": "user", "content": _render(user, row, where)})
        samples.append(
            Sample(
                id=sid,
                task=spec.name,
                messages=tuple(messages),
                reference=row[spec.reference_field],
                strata={f: str(row[f]) for f in spec.strata},
                metadata={f: row[f] for f in spec.metadata_fields if f in row},
            )
        )
    return samples


def packaged_fixture(task: str) -> tuple[list[dict[str, Any]], list[Sample]]:
    """A packaged task's fixture rows and their Samples, as `eval --data fixture` builds them."""
    spec = load_task_spec(packaged_tasks() / f"{task}.yaml")
    rows, _ = load_rows(spec, "fixture", root=data_root())
    return rows, build_samples(spec, rows, source=task)
