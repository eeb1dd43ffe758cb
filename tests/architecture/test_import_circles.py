"""No import circles in static_consumer, assignors and static_consumer_lab, counting every import
statement: type-only ones (``if TYPE_CHECKING:``) and in-function ones too, which hide a circle from
the interpreter but not from a reader. Where a lower module needs a higher one's type, it declares a
small Protocol of its own instead (e.g. ``_security.secrets.SecretFields``)."""

from __future__ import annotations

from pathlib import Path

from import_graph import circles, graph


def test_no_module_imports_itself_through_others() -> None:
    found = circles(graph())
    assert found == [], "import circles: " + "; ".join(" -> ".join(circle) for circle in found)


def test_a_circle_closed_by_a_type_only_or_an_in_function_import_is_named(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.high import High\n"
    )
    (package / "high.py").write_text("def late():\n    from pkg import low\n")
    (package / "sub" / "a.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text("from ..sub.a import thing\n")
    (package / "alone.py").write_text("import pkg.low\nfrom pkg import sub\n")
    assert sorted(circles(graph({"pkg": package}))) == [
        ["pkg.high", "pkg.low", "pkg.high"],
        ["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"],
    ]
