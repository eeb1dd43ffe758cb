"""The rolling-bounce experiment behind ``static-consumer demo`` / ``make demo``.

Not part of the runtime library: it starts brokers and consumer processes through
:mod:`static_consumer.testing`. ``runner`` drives the bounce, ``metrics`` computes the table from the
observed events (pure), ``report`` prints and writes it, ``main`` is the command line.
"""

from static_consumer.demo.main import main

__all__ = ["main"]
