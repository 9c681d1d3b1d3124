"""Files evalsuite ships inside the package: the built-in task specs, their fixture subsets, the rig's models.

Each file exists once in the repository, where contributors look for it:
`tasks/*.yaml` and `fixtures/` at the top.  `evalsuite/package-data/tasks` and
`evalsuite/package-data/fixtures` are symbolic links to those folders, so an
editable install reads the checkout's files and a built wheel holds real
copies (`[tool.setuptools.package-data]` in pyproject.toml).  Everything is
found through `importlib.resources`, never through the current folder or a
checkout around the package, so `pip install evalsuite` works in any folder.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from evalsuite.errors import ConfigError


def data_root() -> Path:
    """The packaged data folder (holds `tasks/` and `fixtures/`) as a real path on disk.

    Servers, graders and dataset readers need real paths; a package imported
    from a zip file has none, which is said in a sentence instead of failing
    deep inside a reader.
    """
    root = files("evalsuite").joinpath("package-data")
    if not isinstance(root, Path):
        raise ConfigError(
            f"evalsuite is installed in a form without real files ({root}); its built-in tasks need a "
            "normal installation: pip install evalsuite (not a zip archive)."
        )
    return root


def packaged_tasks() -> Path:
    """The folder of the built-in task specs (math500, gsm8k, livecodebench, humaneval, ...)."""
    return data_root() / "tasks"


def packaged_fixtures() -> Path:
    """The folder of the bundled dataset subsets (`--data fixture`) and the rig's trained models."""
    return data_root() / "fixtures"
