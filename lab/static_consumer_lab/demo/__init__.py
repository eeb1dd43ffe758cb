"""The rolling-bounce experiment behind ``static-consumer demo`` / ``make demo``.

Not part of the runtime library: it starts brokers and consumer processes through
:mod:`static_consumer_lab`. ``strategies`` holds what is compared and the knobs, ``runner`` drives
one bounce of every strategy at once and saves the raw events (``rundata``), ``metrics`` defines the
table, ``tally`` (the run's own count) and ``recount`` (from the saved files) compute it independently,
``report`` and ``plot`` render it, ``main`` is the command line.
"""

from static_consumer_lab.demo.main import main

__all__ = ["main"]
