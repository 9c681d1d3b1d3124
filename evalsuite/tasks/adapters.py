"""Dataset adapters, found by name through the `evalsuite.task_adapters` entry-point group.

An adapter is a module (or any object) with these hooks, all optional but the first:

- `prepare_rows(rows, options) -> rows`: run on every source's rows (decode,
  filter, derive fields such as the reference);
- `load_hf(path, revision, options) -> (rows, location)`: hub data that
  `datasets` cannot load;
- `code_tests(reference, where) -> CodeTests`: for code tasks, the tests of
  one stored reference (`where` names it in errors) (see `evalsuite.sandbox.cases`), so the code grader never
  knows a dataset's test format.

evalsuite's own adapters are registered in its `pyproject.toml` the same way
an outside package registers one:

    [project.entry-points."evalsuite.task_adapters"]
    mybench = "mypackage.mybench"

A task spec names one by that name (`dataset.adapter: mybench`); a module's
import path (`mypackage.mybench`) also works, for an adapter no installed
package registers.  Code references name their adapter under the `adapter`
key, so a stored run is graded by the adapter that wrote it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from evalsuite import plugins
from evalsuite.errors import DatasetError
from evalsuite.sandbox.cases import CodeTests

GROUP = plugins.TASK_ADAPTERS
# References written before they named their adapter are LiveCodeBench's (the only code task then).
_UNNAMED_CODE_REFERENCE = "livecodebench"


def registered() -> dict[str, str]:
    """Adapter names and the objects they point at, from every installed package."""
    return plugins.registered(GROUP)


def find_adapter(name: str) -> Any:
    """The adapter registered as `name`, else the module at the import path `name`."""
    if plugins.is_registered(GROUP, name):
        try:
            adapter = plugins.load(GROUP, name, "dataset adapter")
        except plugins.PluginError as exc:
            raise DatasetError(str(exc)) from None
    else:
        try:
            adapter = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise DatasetError(f"Dataset adapter '{name}' cannot be imported ({exc}).") from None
            known = ", ".join(sorted(registered())) or "none"
            raise DatasetError(
                f"Unknown dataset adapter '{name}': neither registered in the {GROUP} entry-point group "
                f"({known}) nor an importable module. A package registers one in its pyproject.toml; after "
                "editing that file, reinstall it (pip install -e .)."
            ) from None
        except Exception as exc:  # noqa: BLE001 - an adapter that fails on import must be a sentence
            raise DatasetError(f"Dataset adapter '{name}' cannot be imported: {type(exc).__name__}: {exc}.") from None
    if not callable(getattr(adapter, "prepare_rows", None)):
        raise DatasetError(f"Dataset adapter '{name}' has no prepare_rows(rows, options).")
    return adapter


def code_tests(reference: Any, where: str = "reference") -> CodeTests:
    """The tests of one code sample, decoded by the adapter its reference names."""
    if not isinstance(reference, Mapping):
        raise DatasetError(f"{where}: the reference is not an object naming its tests.")
    name = reference.get("adapter")
    if name is None and ("public_test_cases" in reference or "private_test_cases" in reference):
        name = _UNNAMED_CODE_REFERENCE
    if not isinstance(name, str) or not name:
        raise DatasetError(f"{where}: the reference names no adapter that could read its tests.")
    adapter = find_adapter(name)
    hook = getattr(adapter, "code_tests", None)
    if not callable(hook):
        raise DatasetError(f"{where}: dataset adapter '{name}' has no code_tests(reference); it is not a code task.")
    tests = hook(reference, where=where)
    if not isinstance(tests, CodeTests):
        raise DatasetError(f"{where}: dataset adapter '{name}' returned a {type(tests).__name__}, not CodeTests.")
    return tests
