"""A crash restart takes back its own dead predecessor's partitions at once (protocol='consumer', static
members, ``restart_state_dir`` set).

Under the consumer protocol the coordinator refuses a restart that joins with the instance id of a member
that never left (UNRELEASED_INSTANCE_ID) until that member's session expires, 45 s on a stock broker
(``rejoin.py`` waits for it). A member that leaves for a while (its static leave, member epoch -2) keeps
its assignment, and the next join with its instance id takes that assignment over; the coordinator takes
the leave from whoever names the holder's member id (``_kafka/release.py``). So a restart that can prove
that the holder is its own dead predecessor sends the leave for it and joins at once.

The proof lies in ``restart_state_dir``, a volume that survives a container restart in the pod, with two
files per group and instance id:

- ``<group>.<instance id>.lock``: the process that runs the member holds an exclusive ``flock`` on it while
  it runs. The kernel drops the lock when the process ends, however it ends (kill -9, an OOM kill, a
  crash); a running process keeps it, and so does a stopped one (SIGSTOP). Taking it (non-blocking) proves
  that every process that held it before is gone.
- ``<group>.<instance id>.json``: the member ids of the clients those processes joined with, newest
  first, each written before its client subscribes (so no client can join unrecorded). librdkafka
  generates a random member id per client under the consumer protocol.

A member id from the file that still holds the instance id is therefore a client of a process that is
gone, and the coordinator's own check (member id against instance id, in the same step as the leave) is
the match. A holder the file does not name (another pod, a copied Deployment, a force-deleted pod whose
node came back) is never released: the coordinator refuses the leave (FENCED_INSTANCE_ID) and the
restart waits as without the file (``rejoin.py``: exit 82 for a live duplicate, 75 after a session +
``release_margin_s``). A lock held by another process (a live or frozen process of this pod with the same
instance id) means no leave at all, and any failure (a missing or read-only directory, the broker
unreachable, an ACL) means the same ordinary wait.

At each join with a new client: take the lock if not held yet (and then release the recorded members),
record the new client's member id, subscribe. A client closed in time by a healthy member sends its own
static leave (librdkafka's close()), so the file is emptied then and a restart after it has nothing to
send.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from pathlib import Path
from urllib.parse import quote

from static_consumer._core.seam import ConsumerAdapter
from static_consumer._core.session import Session, State

log = logging.getLogger(__name__)

KEEP = 4  # member ids kept: this pod's newest clients for the id (the holder is one of them)
_MAX_NAME = 200  # file names stay well below the usual limit of 255 bytes


class RestartRecord:
    """The lock and the member-id file of one group and instance id in ``directory``."""

    def __init__(self, directory: Path, group_id: str, instance_id: str) -> None:
        name = f"{quote(group_id, safe='')}.{instance_id}"
        if len(name) > _MAX_NAME:
            name = hashlib.sha256(name.encode()).hexdigest()
        self.lock_path = directory / f"{name}.lock"
        self.ids_path = directory / f"{name}.json"
        self._lock: int | None = None

    @property
    def held(self) -> bool:
        return self._lock is not None

    def claim(self) -> bool:
        """Take the lock without waiting; False when another process holds it. Raises OSError when the
        directory cannot hold it."""
        if self._lock is not None:
            return True
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            os.close(fd)
            raise
        self._lock = fd
        return True

    def member_ids(self) -> list[str]:
        """The recorded member ids, newest first (none when the file is missing or unreadable)."""
        try:
            data = json.loads(self.ids_path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            log.warning("ignoring %s: %s", self.ids_path, exc)
            return []
        ids = data.get("member_ids") if isinstance(data, dict) else None
        return [i for i in ids if isinstance(i, str) and i] if isinstance(ids, list) else []

    def record(self, member_id: str) -> None:
        """Put ``member_id`` first (atomically: a crash leaves the old file or the new one)."""
        ids = [member_id, *(i for i in self.member_ids() if i != member_id)][:KEEP]
        self._write(ids)

    def clear(self) -> None:
        self._write([])

    def unlock(self) -> None:
        fd, self._lock = self._lock, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the lock drops it

    def _write(self, ids: list[str]) -> None:
        temporary = self.ids_path.with_name(self.ids_path.name + ".new")
        temporary.write_text(json.dumps({"member_ids": ids}))
        os.replace(temporary, self.ids_path)


class Predecessor:
    """What the joins of one static member under the consumer protocol do with its restart record."""

    def __init__(self) -> None:
        self.record: RestartRecord | None = None
        self.off = False  # no directory set, not a static member, or the directory failed once
        self.unrecorded: ConsumerAdapter | None = None  # a client whose member id was not known yet
        self._told_held = False

    def before_subscribe(self, session: Session, adapter: ConsumerAdapter) -> None:
        """Before ``adapter`` subscribes: take the lock (the first time it is free, release the members
        the file names), then record the client's member id."""
        record = self._record(session)
        if record is None:
            return
        try:
            if not record.held:
                if not record.claim():
                    self._held_elsewhere(session, record)
                    return
                self._release(session, record)
            self._note(record, adapter)
        except OSError as exc:
            log.warning(
                "restart_state_dir %s is unusable (%s): a crash restart of %r waits for its id to be "
                "released instead of taking its partitions back at once",
                record.lock_path.parent,
                exc,
                session.instance_id,
            )
            self.off = True

    def after_poll(self, adapter: ConsumerAdapter) -> None:
        """Record a member id the client did not know before it subscribed, once it does."""
        if self.unrecorded is adapter and self.record is not None and not self.off:
            try:
                self._note(self.record, adapter)
            except OSError as exc:
                log.warning("could not record the member id in %s (%s)", self.record.ids_path, exc)
                self.off = True

    def client_closed(self, session: Session, *, in_time: bool) -> None:
        """The client closed (``in_time``: within its bound). A member that was healthy (closing) or
        fenced leaves nothing for a restart to release: its client sent its static leave, or another
        process holds the id. The lock goes with a client that closed in time; one still closing keeps
        it until the process ends."""
        self.unrecorded = None
        record = self.record
        if record is None or not record.held or not in_time:
            return
        try:
            if session.state in (State.CLOSING, State.FENCED) and not self.off:
                record.clear()
        except OSError as exc:
            log.warning("could not clear %s (%s)", record.ids_path, exc)
        finally:
            record.unlock()

    def _record(self, session: Session) -> RestartRecord | None:
        if self.record is None and not self.off:
            directory, instance_id = session.settings.restart_state_dir, session.instance_id
            if directory is None or instance_id is None:
                self.off = True
                return None
            self.record = RestartRecord(Path(directory), session.settings.group_id, instance_id)
        return None if self.off else self.record

    def _held_elsewhere(self, session: Session, record: RestartRecord) -> None:
        if not self._told_held:
            self._told_held = True
            log.warning(
                "another process of this pod holds %s (it runs, or is stopped, with group.instance.id %r): "
                "nothing is released for it; this process joins as usual and does not record its member ids",
                record.lock_path,
                session.instance_id,
            )

    def _release(self, session: Session, record: RestartRecord) -> None:
        ids, instance_id = record.member_ids(), session.instance_id
        if not ids or instance_id is None:
            return
        began = session.clock()
        try:
            released = session.release_member(session.settings, instance_id, ids)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the restart to the ordinary wait
            log.warning(
                "could not release group.instance.id %r for this pod's previous process (%s): joining as "
                "usual; if the id is still held, the restart waits for the broker to release it",
                instance_id,
                exc,
            )
            return
        took = session.clock() - began
        if released is None:
            log.info(
                "group.instance.id %r is not held by a member this pod recorded (%s; asked in %.3fs): "
                "joining as usual",
                instance_id,
                ", ".join(ids),
                took,
            )
            return
        log.info(
            "released group.instance.id %r from member %s, a client of this pod's previous process, "
            "which is gone (its lock %s was free); joining in its place with its partitions (%.3fs)",
            instance_id,
            released,
            record.lock_path,
            took,
        )

    def _note(self, record: RestartRecord, adapter: ConsumerAdapter) -> None:
        member_id = adapter.member_id()
        self.unrecorded = None if member_id else adapter
        if member_id:
            record.record(member_id)


__all__ = ["KEEP", "Predecessor", "RestartRecord"]
