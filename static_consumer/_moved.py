"""Deprecation shims for modules that moved: the old import path keeps working, with a warning."""

from __future__ import annotations

import warnings


def warn_moved(old: str, new: str) -> None:
    """Warn (DeprecationWarning) that module ``old`` now lives at ``new``."""
    warnings.warn(
        f"{old} moved to {new}; import it from there (the old path will be removed in a future release)",
        DeprecationWarning,
        stacklevel=3,
    )


__all__ = ["warn_moved"]
