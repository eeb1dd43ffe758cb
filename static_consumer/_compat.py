"""The one place for import paths that moved: :data:`MOVED` names each old path, its new one and the
release that removes the old one. A small import hook serves the old paths with a DeprecationWarning;
nothing else in the project imports them, and no shim module is left at an old path.

The module an old path gives is an alias of the new one: attributes are read from the new module (under
their new name where :data:`RENAMED` says one changed), so classes and functions are the same objects.
``python -m <old path>`` runs the new module. Old paths of the harness and the demo lead to the
``static-consumer-lab`` distribution (``pip install 'static-consumer[testing]'`` or ``[demo]``); without
it, the import fails with a message that says so.

:func:`install` puts one finder at the front of ``sys.meta_path`` (``static_consumer/__init__.py`` calls
it): it answers for the old paths only, at the cost of a dictionary look-up for any other import.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from typing import TYPE_CHECKING, Any, NamedTuple, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

REMOVAL = "0.3.0"
_LAB = "the static-consumer-lab distribution: pip install 'static-consumer[testing]'"
_DEMO = "the static-consumer-lab distribution: pip install 'static-consumer[demo]'"


class Moved(NamedTuple):
    """Where an old import path leads, the release that removes it, and what to install for it."""

    new: str
    removal: str = REMOVAL
    needs: str = ""  # the distribution the new path belongs to, when it is not this one


# Old path -> new path. A path ending in ".*" covers every module below the old package.
MOVED: Mapping[str, Moved] = {
    "static_consumer.audit": Moved("static_consumer.admin.audit"),
    "static_consumer.cli": Moved("static_consumer.admin.cli"),
    "static_consumer.bounce": Moved("static_consumer_lab.demo", needs=_DEMO),
    "static_consumer.bounce.metrics": Moved("static_consumer_lab.demo.metrics", needs=_DEMO),
    "static_consumer.bounce.report": Moved("static_consumer_lab.demo.report", needs=_DEMO),
    "static_consumer.bounce.runner": Moved("static_consumer_lab.demo.runner", needs=_DEMO),
    "static_consumer.demo": Moved("static_consumer_lab.demo", needs=_DEMO),
    "static_consumer.demo.*": Moved("static_consumer_lab.demo.*", needs=_DEMO),
    "static_consumer.testing": Moved("static_consumer_lab", needs=_LAB),
    "static_consumer.testing.*": Moved("static_consumer_lab.*", needs=_LAB),
}
# Names that changed along with the path: new module -> {old name: new name}.
RENAMED: Mapping[str, Mapping[str, str]] = {
    "static_consumer_lab": {"describe_group": "describe_consumer_group"},
    "static_consumer_lab.kafka_ops": {"describe_group": "describe_consumer_group"},
}


def new_path(old: str) -> tuple[str, Moved] | None:
    """The new path of module ``old`` and its entry in :data:`MOVED`; None when it did not move."""
    entry = MOVED.get(old)
    if entry is not None:
        return entry.new, entry
    package, _, rest = old.partition(".")
    while rest:
        head, _, rest = rest.partition(".")
        package = f"{package}.{head}"
        tree = MOVED.get(f"{package}.*")
        if tree is not None:
            below = old[len(package) + 1 :]
            return tree.new.removesuffix("*") + below, tree
    return None


class _Alias(types.ModuleType):
    """An old module path: reads its attributes from the new module."""

    def __init__(self, name: str, target: types.ModuleType) -> None:
        super().__init__(name, target.__doc__)
        self.__dict__["_target"] = target
        self.__dict__["_renamed"] = RENAMED.get(target.__name__, {})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, self._renamed.get(name, name))

    def __dir__(self) -> list[str]:
        return sorted({*dir(self._target), *self._renamed})


class _Loader:
    def __init__(self, new: str, entry: Moved) -> None:
        self.new, self.entry = new, entry

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        try:
            target = importlib.import_module(self.new)
        except ModuleNotFoundError as exc:
            if not self.entry.needs or exc.name is None or not self.new.startswith(exc.name):
                raise
            raise ModuleNotFoundError(
                f"{spec.name} moved to {self.new}, in {self.entry.needs}", name=spec.name
            ) from None
        alias = _Alias(spec.name, target)
        if hasattr(target, "__path__"):
            # A package: its submodules come through this hook too, never from the new directory.
            alias.__path__ = []
            alias.__package__ = spec.name
        else:
            alias.__package__ = spec.name.rpartition(".")[0]
        return alias

    def exec_module(self, module: types.ModuleType) -> None:
        warnings.warn(_message(module.__name__, self.new, self.entry), DeprecationWarning, _stacklevel())

    def get_code(self, fullname: str) -> types.CodeType:
        """For ``python -m <old path>``: run the new module as ``__main__``."""
        source = (
            "import runpy, warnings\n"
            f"warnings.warn({_message(fullname, self.new, self.entry)!r}, DeprecationWarning)\n"
            f"runpy.run_module({self.new!r}, run_name='__main__', alter_sys=True)\n"
        )
        return compile(source, f"<{fullname}, moved to {self.new}>", "exec")


class _Finder:
    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(_OLD_PREFIXES):
            return None
        found = new_path(fullname)
        if found is None:
            return None
        return ModuleSpec(fullname, cast("Loader", _Loader(*found)))  # a Loader, without importlib.abc


_OLD_PREFIXES = tuple({old.removesuffix(".*") for old in MOVED})
_FINDER = _Finder()


def install() -> None:
    """Serve the old paths from now on (once per process)."""
    if _FINDER not in sys.meta_path:
        # At the front: a stale directory at an old path (left by a checkout) must not shadow the hook.
        sys.meta_path.insert(0, _FINDER)


def _message(old: str, new: str, entry: Moved) -> str:
    where = f" ({entry.needs})" if entry.needs else ""
    return f"{old} moved to {new}{where}; import it from there: the old path goes in {entry.removal}"


def _stacklevel() -> int:
    """The stack level of the first frame outside this module and the import machinery: the import
    statement that named the old path, so the warning points there."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename == __file__ or frame.f_code.co_filename.startswith("<frozen importlib")
    ):
        frame, level = frame.f_back, level + 1
    return level


__all__ = ["MOVED", "REMOVAL", "RENAMED", "Moved", "install", "new_path"]
