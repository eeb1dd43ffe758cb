"""Carrying out :func:`~static_consumer._core.recovery.attempts.attempts` for one
:class:`~static_consumer.StaticConsumer`: the handler calls, the waits, the dead-letter writes, the
events, and the commit of what was settled. ``run_until_sigterm`` (and so every pool worker) runs each
batch through :class:`FailureHandling`; the asyncio runner drives the same steps with awaits
(``static_consumer.aio._failures``).

Commit order: a batch's offsets are committed only after every record of it was handled, dead-lettered
(the write acknowledged, :class:`~static_consumer._kafka.dead_letter.DeadLetters`) or skipped; when the
runner stops part-way (``failure_action='stop'``, a dead-letter write that failed, SIGTERM during the
retries) it commits the records settled before the first one that was not, and nothing past it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from static_consumer._base.records import Record, RecordList
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import RecordDeadLettered, RecordSkipped, RecordsRetried
from static_consumer._core.recovery.attempts import Call, Outcome, Settle, Step, Wait, attempts
from static_consumer._core.recovery.policy import OnFailure, budget_s
from static_consumer._security.secrets import scrub_for
from static_consumer.settings._failures import dead_letter_topic_for

if TYPE_CHECKING:
    from static_consumer._kafka.dead_letter import DeadLetters

log = logging.getLogger(__name__)

Handler = Callable[[list[Record]], object]
Commit = Callable[[Sequence[Record]], object]
DeadLettersFactory = Callable[[StaticConsumer, Sequence[str]], "DeadLetters"]
_ERROR_CHARS = 500


def _dead_letters(consumer: StaticConsumer, topics: Sequence[str]) -> DeadLetters:
    """The default: every dead-letter topic checked (exists, writable), then the producer."""
    from static_consumer._kafka.dead_letter import DeadLetters, check_topics

    return DeadLetters(consumer.settings, check_topics(consumer.settings, topics))


def where(record: Record) -> str:
    return f"{record.topic}[{record.partition}]@{record.offset}"


class Recovery:
    """What both runners share: the policy, the dead-letter topics (checked before joining; a topic of
    a ``^regex`` subscription when its first record arrives), the events and the log lines."""

    def __init__(
        self,
        consumer: StaticConsumer,
        policy: OnFailure | None = None,
        dead_letters: DeadLettersFactory | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.consumer = consumer
        self.settings = consumer.settings
        self.policy = policy or OnFailure.from_settings(consumer.settings)
        self.budget_s = budget_s(consumer.settings)
        self.clock = clock
        self._make_dead_letters = dead_letters or _dead_letters
        self._dead_letters: DeadLetters | None = None
        self._checked: set[str] = set()  # source topics whose dead-letter topic was checked
        self._patterns = [t for t in self.settings.topics if t.startswith("^")]

    @property
    def dead_lettering(self) -> bool:
        return self.policy.then == "dead_letter"

    @property
    def watching_patterns(self) -> bool:
        """Whether batches must be looked at for topics seen the first time (``^regex`` subscriptions)."""
        return self.dead_lettering and bool(self._patterns)

    def prepare(self) -> None:
        """Before the consumer joins: check the dead-letter topic of every named source topic (exists,
        writable) and build the producer, so a missing topic or ACL fails the start, not the first
        failure."""
        if self.dead_lettering:
            self._check([t for t in self.settings.topics if not t.startswith("^")])

    def _check(self, sources: Sequence[str]) -> None:
        new = [t for t in dict.fromkeys(sources) if t not in self._checked]
        if not new and self._dead_letters is not None:
            return
        targets = [dead_letter_topic_for(self.policy.dead_letter_topic, t) for t in new]
        for target in targets:
            caught = [p for p in self._patterns if re.match(p[1:], target)]
            if caught:
                from static_consumer._base.errors import ConfigurationError

                raise ConfigurationError(
                    f"the dead-letter topic {target!r} matches the subscription {caught}: failed records "
                    "would be consumed again; change dead_letter_topic or the pattern"
                )
        if self._dead_letters is None:
            self._dead_letters = self._make_dead_letters(self.consumer, targets)
        elif targets:
            from static_consumer._kafka.dead_letter import check_topics

            self._dead_letters.partitions.update(check_topics(self.settings, targets))
        self._checked.update(new)

    def arrived(self, batch: Sequence[Record]) -> None:
        """A batch arrived: under a ``^regex`` subscription, check the dead-letter topics of topics seen
        for the first time (before any of their records can fail)."""
        if not self.watching_patterns:
            return
        if isinstance(batch, RecordList):
            topics = {topic for topic, _ in batch.highest_offsets()}
        else:
            topics = {r.topic for r in batch}
        if not topics <= self._checked:
            self._check(sorted(topics))

    def text(self, error: BaseException) -> str:
        return f"{type(error).__name__}: {scrub_for(self.settings, str(error))}"[:_ERROR_CHARS]

    def retrying(self, step: Wait) -> None:
        log.warning(
            "the handler failed on %s (attempt %d, %d records): %s; retrying in %.1fs",
            where(step.first),
            step.attempt,
            step.records,
            self.text(step.error),
            step.seconds,
        )
        self.consumer._emit_event(
            RecordsRetried,
            partition=step.first.topic_partition,
            offset=step.first.offset,
            records=step.records,
            attempt=step.attempt,
            wait_s=step.seconds,
            error=self.text(step.error),
        )

    def settle(self, step: Settle) -> None:
        """Dead-letter (acknowledged) or skip ``step.record``; raises when the dead-letter write fails."""
        record, error = step.record, self.text(step.error)
        if not self.dead_lettering:
            log.error("skipping %s after %d attempts: %s", where(record), step.attempts, error)
            self.consumer._emit_event(
                RecordSkipped,
                partition=record.topic_partition,
                offset=record.offset,
                attempts=step.attempts,
                error=error,
            )
            return
        self._check([record.topic])
        assert self._dead_letters is not None
        target = dead_letter_topic_for(self.policy.dead_letter_topic, record.topic)
        written = self._dead_letters.send(
            record, target, error=step.error, attempts=step.attempts, instance_id=self.consumer.instance_id
        )
        log.error(
            "dead-lettered %s after %d attempts to %s[%d]@%d: %s",
            where(record),
            step.attempts,
            written.topic,
            written.partition,
            written.offset,
            error,
        )
        self.consumer._emit_event(
            RecordDeadLettered,
            partition=record.topic_partition,
            offset=record.offset,
            attempts=step.attempts,
            error=error,
            dead_letter=(written.topic, written.partition, written.offset),
        )

    def ended(self, outcome: Outcome) -> None:
        """Note on the error a stopping outcome raises what happened to its record."""
        if outcome.error is None or outcome.failed is None:
            return
        outcome.error.add_note(
            f"static_consumer: the handler failed on {where(outcome.failed)} ({outcome.attempts} attempts, "
            f"failure_action={self.policy.then!r}); nothing from it on was committed"
        )

    def close(self) -> None:
        if self._dead_letters is not None:
            self._dead_letters.close()


class FailureHandling:
    """Runs each batch through the handler under the policy and commits what was settled (the sync
    runners: ``run_until_sigterm``, the pool's workers). ``sleep`` waits between attempts (default: the
    consumer's own wait, which :meth:`StaticConsumer.stop` ends)."""

    def __init__(
        self,
        consumer: StaticConsumer,
        handler: Handler,
        *,
        policy: OnFailure | None = None,
        dead_letters: DeadLettersFactory | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recovery = Recovery(consumer, policy, dead_letters, clock)
        self._consumer = consumer
        self._handler = handler
        self._sleep = sleep or consumer._retry_wait

    def prepare(self) -> None:
        self.recovery.prepare()

    def close(self) -> None:
        self.recovery.close()

    def handle(self, batch: list[Record], commit: Commit) -> None:
        """Handle ``batch`` (retrying, dead-lettering or skipping per the policy), then ``commit`` what
        was settled; raise the handler's error when the policy stops."""
        r = self.recovery
        r.arrived(batch)
        steps = attempts(
            batch, r.policy, budget_s=r.budget_s, clock=r.clock, stopping=lambda: self._consumer.stopping
        )
        settled = 0
        try:
            step: Step = next(steps)
            while True:
                step = steps.send(self._carry_out(step))
                if isinstance(step, Settle):
                    settled = step.settled
        except StopIteration as done:
            outcome: Outcome = done.value
        except BaseException:
            # A dead-letter write or a listener failed: what was settled before is committed, the record
            # and what follows it are not.
            if settled:
                commit(batch[:settled])
            raise
        _commit_outcome(batch, outcome, commit)
        r.ended(outcome)
        if outcome.error is not None:
            raise outcome.error

    def _carry_out(self, step: Step) -> BaseException | None:
        if isinstance(step, Call):
            try:
                self._handler(step.records if isinstance(step.records, list) else list(step.records))
            except BaseException as exc:  # noqa: BLE001 - judged by the steps (library errors end them)
                return exc
            return None
        if isinstance(step, Wait):
            self.recovery.retrying(step)
            self._sleep(step.seconds)
            return None
        self.recovery.settle(step)
        return None


def _commit_outcome(batch: Sequence[Record], outcome: Outcome, commit: Commit) -> None:
    if outcome.settled >= len(batch):
        commit(batch)  # the batch itself: a RecordList knows its highest offsets
    elif outcome.settled:
        commit(batch[: outcome.settled])
    if outcome.interrupted:
        log.info(
            "stopping during the retries: %d of %d records of the batch committed, the rest is read again "
            "after the restart",
            outcome.settled,
            len(batch),
        )


__all__ = ["Commit", "DeadLettersFactory", "FailureHandling", "Handler", "Recovery", "where"]
