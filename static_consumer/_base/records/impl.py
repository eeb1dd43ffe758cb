"""Which Record implementation this process uses: the native one (``native.c``, built when the package
is installed with a C compiler at hand) or the pure-Python one (``pure``) of the same behaviour.

``STATIC_CONSUMER_PURE_PYTHON=1`` forces the pure-Python one (read once, at import), e.g. to run the
tests against both. Both provide ``Record`` and the adapter's helpers: ``wrap`` (the client's messages
to Records, in place, with the highest offset per partition), ``wrap_one`` and ``column``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

PURE_PYTHON_ENV = "STATIC_CONSUMER_PURE_PYTHON"

if TYPE_CHECKING:
    from static_consumer._base.records.native import Record, column, wrap, wrap_one

    NATIVE: bool
elif os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
    from static_consumer._base.records.pure import Record, column, wrap, wrap_one

    NATIVE = False
else:
    try:
        from static_consumer._base.records.native import Record, column, wrap, wrap_one

        NATIVE = True
    except ImportError:  # not built (no C compiler at install): the same behaviour, slower
        from static_consumer._base.records.pure import Record, column, wrap, wrap_one

        NATIVE = False

__all__ = ["NATIVE", "PURE_PYTHON_ENV", "Record", "column", "wrap", "wrap_one"]
