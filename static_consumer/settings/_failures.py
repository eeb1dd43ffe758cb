"""Rules of the handler-failure settings (``failure_*``, ``dead_letter_*``), and the dead-letter topic's
name. Pure; reads the model through a Protocol, like ``_rules``."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Protocol

from static_consumer.settings._rules import is_topic

TOPIC_PLACEHOLDER = "topic"
_DEAD_LETTER_ONLY = ("dead_letter_topic", "dead_letter_timeout_s")


class FailureFields(Protocol):
    """The settings as these rules read them (``ConsumerSettings`` is one)."""

    @property
    def model_fields_set(self) -> set[str]: ...

    @property
    def topics(self) -> Sequence[str]: ...

    @property
    def failure_action(self) -> str: ...

    @property
    def failure_backoff_s(self) -> float: ...

    @property
    def failure_max_backoff_s(self) -> float: ...

    @property
    def dead_letter_topic(self) -> str: ...


def dead_letter_topic_for(template: str, topic: str) -> str:
    """The dead-letter topic of source ``topic``: ``template`` with ``{topic}`` replaced."""
    return template.replace("{" + TOPIC_PLACEHOLDER + "}", topic)


def _placeholders(template: str) -> list[str] | None:
    """The ``{name}`` placeholders of ``template``; None when it does not parse (a lone brace)."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError:
        return None


def failure_problems(s: FailureFields) -> list[str]:
    """Cross-field rules of the failure settings; each message says what to change."""
    out: list[str] = []
    if s.failure_max_backoff_s < s.failure_backoff_s:
        out.append(
            f"failure_max_backoff_s ({s.failure_max_backoff_s}) is below failure_backoff_s "
            f"({s.failure_backoff_s}); raise it or lower failure_backoff_s"
        )
    if s.failure_action != "dead_letter":
        given = [name for name in _DEAD_LETTER_ONLY if name in s.model_fields_set]
        if given:
            out.append(
                f"{', '.join(given)} only applies with failure_action='dead_letter' (it is "
                f"{s.failure_action!r}); set failure_action='dead_letter' or remove it"
            )
    template = s.dead_letter_topic
    names = _placeholders(template)
    if names is None or any(name != TOPIC_PLACEHOLDER for name in names):
        out.append(
            f"dead_letter_topic {template!r}: the only placeholder is {{topic}} (the source topic), "
            "e.g. '{topic}-dlt' or 'orders-dead-letters'"
        )
        return out
    if not is_topic(dead_letter_topic_for(template, "t")) or template.startswith("^"):
        out.append(
            f"dead_letter_topic {template!r} is no legal topic name: use 1-249 characters of "
            "[A-Za-z0-9._-] and {topic}"
        )
        return out
    literal = [t for t in s.topics if not t.startswith("^")]
    loops = [t for t in literal if dead_letter_topic_for(template, t) in literal]
    if loops:
        out.append(
            f"dead_letter_topic {template!r} names a subscribed topic for {loops}: a failed record would "
            "be consumed again; use a name of its own, e.g. '{topic}-dlt'"
        )
    too_long = [t for t in literal if len(dead_letter_topic_for(template, t)) > 249]
    if too_long:
        out.append(f"dead_letter_topic {template!r} makes a name longer than 249 characters for {too_long}")
    return out


__all__ = ["TOPIC_PLACEHOLDER", "FailureFields", "dead_letter_topic_for", "failure_problems"]
