"""What the runners do when the batch handler raises: retry with a bounded back-off, then stop, write
the record to a dead-letter topic, or skip it (docs/failures.md).

- ``policy``: :class:`OnFailure`, tenacity's ``stop`` and ``wait`` combined with the action (pure);
- ``attempts``: one batch through the handler under a policy, as steps a runner carries out (sans I/O:
  the same logic drives the sync and the asyncio runner);
- ``runner``: carrying the steps out for a :class:`~static_consumer.StaticConsumer`: the handler calls,
  the waits, the dead-letter writes, the events and the commit of what was settled.
"""
