"""docs/architecture.md maps the code: every module of the three packages is named there, by its path,
and its diagram of the layers is the import graph (every import goes to a lower row)."""

from __future__ import annotations

import re
from pathlib import Path

from import_graph import PACKAGES, graph, modules

ROOT = Path(__file__).resolve().parents[2]
MAP = (ROOT / "docs" / "architecture.md").read_text()


def _path(module: str) -> str:
    """A module's path as the page names it: relative to ``static_consumer/``, else with its package."""
    path = modules()[module]
    if module.split(".")[0] == "static_consumer":
        return str(path.relative_to(PACKAGES["static_consumer"]))
    return str(path.relative_to(PACKAGES[module.split(".")[0]].parent))


def _modules() -> list[str]:
    return sorted(_path(m) for m, p in modules().items() if p.suffix == ".py")


def test_every_module_is_on_the_architecture_map() -> None:
    missing = [name for name in _modules() if f"`{name}`" not in MAP]
    assert missing == [], f"docs/architecture.md does not mention {missing}"


def test_the_map_names_no_module_that_does_not_exist() -> None:
    named = {n for n in re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", MAP) if not n.startswith("tests/")}
    existing = set(_modules())
    assert named - existing == set()


# -- the layers --------------------------------------------------------------------------------------


def _rows() -> list[list[str]]:
    """The diagram's rows, top first: the units (``x.py`` or ``x/``) each line begins with."""
    block = MAP.split("## Layers", 1)[1].split("```")[1]
    rows = []
    for line in block.strip().splitlines():
        units = []
        for token in line.split():
            if not token.endswith(("/", ".py")):
                break
            units.append(token)
        rows.append(units)
    return rows


def _unit(path: str, units: list[str]) -> str | None:
    """The most specific unit of the diagram that holds the module at ``path``."""
    holding = [u for u in units if path == u or (u.endswith("/") and path.startswith(u))]
    return max(holding, key=len, default=None)


def test_the_layers_name_every_module_once_and_nothing_else() -> None:
    units = [u for row in _rows() for u in row]
    assert len(units) == len(set(units)), "a unit is on two rows"
    paths = [_path(m) for m in modules()]
    unplaced = [p for p in paths if _unit(p, units) is None]
    assert unplaced == [], f"add these to a row of the Layers diagram in docs/architecture.md: {unplaced}"
    empty = [u for u in units if not any(_unit(p, units) == u for p in paths)]
    assert empty == [], f"the Layers diagram names units that hold no module: {empty}"


def test_every_import_goes_to_a_lower_row_of_the_layers() -> None:
    rows = _rows()
    units = [u for row in rows for u in row]
    row_of = {u: i for i, row in enumerate(rows) for u in row}
    upward = []
    for module, imported in graph().items():
        mine = _unit(_path(module), units)
        for target in sorted(imported):
            theirs = _unit(_path(target), units)
            assert mine is not None and theirs is not None
            if mine != theirs and row_of[mine] >= row_of[theirs]:
                rows_ = f"row {row_of[mine] + 1} -> row {row_of[theirs] + 1}"
                upward.append(f"{module} ({mine}) imports {target} ({theirs}): {rows_}")
    assert upward == [], "imports that go up the Layers of docs/architecture.md:\n" + "\n".join(upward)
