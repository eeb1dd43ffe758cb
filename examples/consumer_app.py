"""A StatefulSet pod's main: consume as a static member, ready while in the group, exit with a clear code.

Everything comes from the environment the manifest sets (examples/statefulset.yaml):

- ``STATIC_CONSUMER_*``: the library's settings (bootstrap servers, group, topics, session timeout, ...);
  with ``STATIC_CONSUMER_SASL_MECHANISM=OAUTHBEARER`` also the ``OAUTH_*`` variables of
  examples/oauth_tokens.py (examples/statefulset-oauth.yaml);
- ``POD_NAME`` (downward API ``metadata.name``): the stable ``group.instance.id``, e.g. ``orders-2``;
- ``CONSUMER_READY_FILE``: the file the readiness probe tests. It exists while this member has joined
  the group (it got an assignment, possibly empty: more pods than partitions is fine) and is removed when
  the member is fenced, loses its partitions, fails or closes.

On SIGTERM the current batch is finished and committed and the consumer closes *without* LeaveGroup,
so the replacement pod (same name, same instance id) takes the same partitions back without a
rebalance, if it is back within the session timeout. Exit codes: 0 after SIGTERM, 82 when fenced
(another process holds this instance id: do not fight it), 78 bad settings, 69 the brokers cannot do
static membership, 75 temporary (brokers unreachable; under protocol='consumer' also an instance id
still held after the group's session, see docs/errors.md), 70 anything else.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from static_consumer import (
    Assigned,
    Closed,
    ConsumerSettings,
    FatalError,
    Fenced,
    Lost,
    MembershipListener,
    Record,
    StandingBy,
    StaticConsumer,
    exit_code_for,
    run_until_sigterm,
)

READY_FILE_ENV = "CONSUMER_READY_FILE"
DEFAULT_READY_FILE = "/var/run/consumer/ready"
log = logging.getLogger("consumer_app")


class ReadinessFile(MembershipListener):
    """Keeps ``path`` in step with group membership, for an ``exec: test -f`` readiness probe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.unready()  # a file left over from a previous container of this pod must not count

    def ready(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()

    def unready(self) -> None:
        self.path.unlink(missing_ok=True)

    def on_assigned(self, event: Assigned) -> None:
        self.ready()

    def on_lost(self, event: Lost) -> None:
        self.unready()  # the session expired or max.poll.interval was exceeded: out of the group

    def on_fenced(self, event: Fenced) -> None:
        self.unready()

    def on_standing_by(self, event: StandingBy) -> None:
        self.unready()  # another live process holds this instance id (duplicate_policy='wait')

    def on_fatal(self, event: FatalError) -> None:
        self.unready()

    def on_closed(self, event: Closed) -> None:
        self.unready()


def handle_batch(records: list[Record]) -> None:
    """Your processing. It must be done with the records when it returns: they are committed then."""
    for record in records:
        log.debug("%s[%d]@%d %r", record.topic, record.partition, record.offset, record.value)


def load_settings(environ: Mapping[str, str] = os.environ) -> ConsumerSettings:
    """The settings from the environment. OAUTHBEARER needs a token provider, which only code can give
    (examples/oauth_tokens.py: the identity provider's client-credentials grant)."""
    if environ.get("STATIC_CONSUMER_SASL_MECHANISM") == "OAUTHBEARER":
        from oauth_tokens import ClientCredentialsTokens  # next to this file in the image

        return ConsumerSettings.load(sasl_oauth_token_provider=ClientCredentialsTokens.from_env(environ))
    return ConsumerSettings.load()


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("LOG_LEVEL", "INFO"), format="%(levelname)s %(name)s: %(message)s"
    )
    readiness = ReadinessFile(Path(os.environ.get(READY_FILE_ENV, DEFAULT_READY_FILE)))
    try:
        settings = load_settings()
        consumer = StaticConsumer(settings, listeners=[readiness])
        run_until_sigterm(consumer, handle_batch)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a documented exit code
        log.error("consumer stopped: %s", exc)
        return exit_code_for(exc)
    finally:
        readiness.unready()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
