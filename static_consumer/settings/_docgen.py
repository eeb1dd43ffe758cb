"""Generate docs/configuration.md from the settings model: ``python -m static_consumer.settings._docgen``.

The model is the single source of truth; a unit test fails when the committed page is stale.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from static_consumer.settings._defaults import CLIENT_DEFAULTS, QUEUE_BOUND
from static_consumer.settings._model import ConsumerSettings
from static_consumer.settings._rules import CLASSIC_ONLY_KEYS, OWNED_KEYS, env_var

_INTRO = """\
# Configuration

<!-- Generated from the settings model by `make docs` (static_consumer.settings._docgen); do not edit. -->

`static_consumer.settings.ConsumerSettings` is frozen and validated once, when it is built. Every field
can be passed as a keyword argument or set through its environment variable (keyword arguments win).
Lists are comma-separated in the environment (`a,b`), `librdkafka` is a JSON object, booleans are
`true`/`false`, and empty variables count as unset. Any invalid value or combination raises
`static_consumer.ConfigurationError` naming the field, its variable and what to change. Numbers must
be finite and within the range shown. A `STATIC_CONSUMER_*` variable that is no setting (a misspelling)
is ignored with a warning naming the closest setting.
"""


def type_name(annotation: Any) -> str:
    """A short, readable rendering of a field annotation (``int | None``, ``"a" | "b"``)."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return type_name(args[0])
    if origin is Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return f"list of {type_name(args[0])}"
    if origin is Mapping:
        return f"map of {type_name(args[0])} to {type_name(args[1])}"
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return str(getattr(annotation, "__name__", annotation))


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    value = field.get_default(call_default_factory=True)
    if value is None or value is PydanticUndefined:
        return "unset"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple | dict) and not value:
        return "empty"
    return f"`{value}`"


_BOUNDS = ((Gt, "gt", ">"), (Ge, "ge", ">="), (Lt, "lt", "<"), (Le, "le", "<="))


def range_text(field: FieldInfo) -> str:
    """The numeric bounds of ``field``, e.g. ``> 0, <= 3600``; empty when it has none."""
    parts = []
    for constraint in field.metadata:
        for kind, attribute, sign in _BOUNDS:
            bound = getattr(constraint, attribute, None)
            if isinstance(constraint, kind) and isinstance(bound, int | float):
                parts.append(f"{sign} {int(bound) if float(bound).is_integer() else bound:,}")
    return ", ".join(parts)


def _instead(fields: str) -> str:
    if fields.startswith("nothing"):
        return fields
    return " or ".join(f"`{f}`" for f in fields.split(" / "))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The whole Markdown page."""
    header = "| Field | Environment variable | Type | Default | Description |"
    lines = [_INTRO, header, "|---|---|---|---|---|"]
    for name, field in ConsumerSettings.model_fields.items():
        cells = (
            f"`{name}`",
            "none: code only" if field.exclude else f"`{env_var(name)}`",
            type_name(field.annotation),
            default_text(field),
            (field.description or "") + (f" Range: {bounds}." if (bounds := range_text(field)) else ""),
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "## librdkafka keys managed by the library", ""]
    lines.append("Setting these in `librdkafka` raises; use the field instead.")
    lines += ["", "| librdkafka key | Use instead |", "|---|---|"]
    lines += [f"| `{key}` | {_instead(field)} |" for key, field in sorted(OWNED_KEYS.items())]
    classic_only = ", ".join(f"`{k}`" for k in sorted(CLASSIC_ONLY_KEYS))
    lines += ["", f'With `protocol = "consumer"` (KIP-848) the broker decides {classic_only}: refused too.']
    lines += ["", "## librdkafka defaults the library changes", ""]
    lines.append(
        "Its consumers get these unless `librdkafka` sets them (any value librdkafka accepts); every other "
        "key keeps librdkafka's default."
    )
    lines += ["", "| librdkafka key | Library default | librdkafka's default | Why |", "|---|---|---|---|"]
    lines += [
        f"| `{key}` | `{d.value}` | `{d.librdkafka_default}` | {_cell(d.reason)}. |"
        for key, d in sorted(CLIENT_DEFAULTS.items())
    ]
    lines += ["", "### Memory", "", QUEUE_BOUND]
    lines += [
        "",
        "Values of `librdkafka` keys that look secret (containing `password`, `secret`, `token`, `key`, ...,",
        "except file `*.location`s) never appear in `repr`, `str`, JSON dumps or error messages.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    print(render(), end="")


__all__ = ["default_text", "main", "render", "type_name"]

if __name__ == "__main__":
    main()
