"""What the Spark runner does with a batch whose ``fn`` kept failing: the settings' ``failure_action``.

``fn`` takes a whole DataFrame, so a batch fails as a whole: the runner retries it with the same
records and the same key (the :class:`~static_consumer.spark.FailurePolicy`, by default the settings'
``failure_retries``; the exactly-once sinks skip what an earlier attempt of the key already wrote),
then ``stop`` re-raises with nothing of the batch committed, and ``dead_letter`` / ``skip`` settle
every record of the batch (each dead-letter write acknowledged first), after which the batch is
recorded done in the checkpoint's ledger and committed like a batch ``fn`` took: its key is spent and
never replayed, so the ledger stays exact. A stop requested during the retries, a stopped Spark
session and the library's own errors are never dead-lettered or skipped.
"""

from __future__ import annotations

from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.recovery.attempts import Settle, cause_of
from static_consumer._core.recovery.policy import is_handler_failure
from static_consumer._core.recovery.runner import DeadLettersFactory, Recovery
from static_consumer.spark._batch import PendingBatch


class BatchRecovery:
    """The Spark runner's side of ``static_consumer._core.recovery``: the same dead-letter topics,
    checks, events and log lines as the record runners, for whole batches."""

    def __init__(self, consumer: StaticConsumer, dead_letters: DeadLettersFactory | None = None) -> None:
        self._consumer = consumer
        self.recovery = Recovery(consumer, dead_letters=dead_letters)

    def prepare(self) -> None:
        self.recovery.prepare()

    def close(self) -> None:
        self.recovery.close()

    def settle_batch(self, batch: PendingBatch, error: BaseException, attempts: int) -> bool:
        """Dead-letter or skip every record of a batch ``fn`` kept failing on; False (re-raise, nothing
        committed) under ``failure_action='stop'``, while stopping, or for an error that is not
        ``fn``'s own. Raises when a dead-letter write fails (nothing of the batch is committed then)."""
        r = self.recovery
        if r.policy.then == "stop" or self._consumer.stopping or not is_handler_failure(error):
            return False
        records = batch.records
        r.arrived(records)
        cause = cause_of(error)
        for index, record in enumerate(records):
            r.settle(Settle(record, attempts, cause, index))
        return True


__all__ = ["BatchRecovery"]
