"""How a batch's Arrow table becomes a Spark DataFrame.

- ``arrow``: ``spark.createDataFrame(table)``. Works everywhere, including Spark Connect (the table
  travels over gRPC, inside the plan below :data:`INLINE_BYTES`, see :func:`inline_batches`; the server
  turns it into rows on its driver). In classic Spark the Arrow batches ride inside the tasks, so big
  batches cost driver memory; tables under ``spark.sql.execution.arrow.localRelationThreshold``
  (default 48 MiB) are even turned into rows on the driver, in one thread, which
  :func:`~.session.local_conf` avoids by setting it to 0.
- ``parquet``: the table is written (uncompressed) to a file and read back with Spark's vectorized
  Parquet reader under the same schema. The executors must read the file at the same path: a local
  session's executors share the driver's disk; for any other Spark session (a cluster master, Spark Connect)
  ``directory`` must name a directory they all see (a shared volume), else ``ConfigurationError``.
  Measured per batch of 100,000 records (DataFrame plus a ``noop`` write; docs/spark.md,
  ``bench/measure_spark_handoff.py``): 0.16 s in the median, against 0.18 s for ``arrow`` with the
  threshold at 0 and 0.33 s at Spark's default; and without the driver-memory cost. The file is deleted
  once ``fn`` returned, so the DataFrame is only valid inside ``fn`` (cache or write what you need
  before returning, as with ``foreachBatch``). A process killed
  before it could clean up leaves at most one batch file behind; the next runner on the host removes
  directories of its processes that no longer run.

``auto`` picks ``parquet`` for a classic session whose master is ``local...`` or when a shared
``directory`` is given, else ``arrow``.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from static_consumer._base.errors import ConfigurationError
from static_consumer.spark._schema import KAFKA_SCHEMA
from static_consumer.spark.session import is_local_master

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

Handoff = Literal["auto", "arrow", "parquet"]
Cleanup = Callable[[], None]


class SessionLike(Protocol):
    """What the runner needs from a SparkSession (classic or Spark Connect)."""

    def createDataFrame(self, data: pa.Table) -> DataFrame: ...  # noqa: N802 - Spark's name

    @property
    def read(self) -> Any: ...


@cache
def spark_schema() -> StructType:
    """The Spark schema of :data:`KAFKA_SCHEMA` (Spark's Kafka source schema)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(KAFKA_SCHEMA)


def session_kind(spark: Any) -> str:
    """``"local"`` (a classic session with a local master), ``"connect"``, or the cluster master URL."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return "connect"
    try:
        master = str(spark.sparkContext.master)
    except Exception:  # noqa: BLE001 - not a classic session (or a stand-in): treat as remote
        return "connect"
    return "local" if is_local_master(master) else master


def choose(handoff: Handoff, spark: Any, directory: str | None = None) -> Literal["arrow", "parquet"]:
    """Resolve ``auto``, and refuse Parquet files where the executors may not be able to read them."""
    kind = session_kind(spark)
    if handoff == "auto":
        return "parquet" if kind == "local" or directory is not None else "arrow"
    if handoff == "parquet" and kind != "local" and directory is None:
        raise ConfigurationError(
            f"handoff='parquet' with a {'Spark Connect' if kind == 'connect' else kind} session: its "
            "executors may run on other hosts and cannot read this process's temporary files. Pass "
            "handoff_dir= a directory every executor reads at the same path (a shared volume), or use "
            "handoff='arrow' (or 'auto')"
        )
    return handoff


_PREFIX = "static-consumer-batches-"


def _host() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"


def sweep_dead(parent: Path) -> None:
    """Remove batch directories left by processes of this host that no longer run (e.g. after
    ``kill -9``). A shared directory also holds other hosts' directories: their processes cannot be
    asked, so those are left alone."""
    for path in parent.glob(f"{_PREFIX}{_host()}-*-*"):
        pid = path.name.removeprefix(f"{_PREFIX}{_host()}-").split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _nothing() -> None:
    """Cleanup of an in-memory handoff."""


# Spark Connect: PySpark uploads a table of spark.sql.session.localRelationCacheThreshold bytes or more
# (Spark 4.2's server says 1 MiB) as artifacts first: cut into 1,024-row Arrow IPC chunks, each hashed
# with SHA-256. For a 100,000-record batch (15 MB) that took 6.3 CPU s per million records in the pod,
# against 0.7 for sending the table inside the plan, and the server's work was the same either way
# (bench/measure_spark_connect.py, docs/spark.md). Below this size batches go inside the plan: half of the
# server's default gRPC message limit (spark.connect.grpc.maxInboundMessageSize, 128 MiB).
INLINE_BYTES = 64 * 1024 * 1024
CACHE_THRESHOLD = "spark.sql.session.localRelationCacheThreshold"


def inline_batches(spark: Any) -> None:
    """Let a Spark Connect session send tables under :data:`INLINE_BYTES` inside the plan (see above);
    a session whose threshold is that high already is left as it is."""
    try:
        current = int(spark.conf.get(CACHE_THRESHOLD))
    except Exception as exc:  # noqa: BLE001 - an older server without the setting: nothing to tune
        log.debug("%s unavailable: %r", CACHE_THRESHOLD, exc)
        return
    if current < INLINE_BYTES:
        spark.conf.set(CACHE_THRESHOLD, str(INLINE_BYTES))
        log.info("%s raised from %d to %d for this session", CACHE_THRESHOLD, current, INLINE_BYTES)


class FrameMaker:
    """Turns Arrow tables into DataFrames by the chosen handoff; :meth:`close` removes its directory."""

    def __init__(self, spark: SessionLike, handoff: Handoff = "auto", directory: str | None = None) -> None:
        self._spark = spark
        self.handoff = choose(handoff, spark, directory)
        if self.handoff == "arrow" and session_kind(spark) == "connect" and hasattr(spark, "conf"):
            inline_batches(spark)
        self._dir: Path | None = None
        if self.handoff == "parquet":
            parent = Path(directory or tempfile.gettempdir())
            parent.mkdir(parents=True, exist_ok=True)
            sweep_dead(parent)
            prefix = f"{_PREFIX}{_host()}-{os.getpid()}-"
            self._dir = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        self._ids = itertools.count()

    def __call__(self, table: pa.Table) -> tuple[DataFrame, Cleanup]:
        if self._dir is None:
            return self._spark.createDataFrame(table), _nothing
        path = self._dir / f"batch-{next(self._ids)}.parquet"
        pq.write_table(table, str(path), compression="none")  # local and short-lived: speed over size
        df: DataFrame = self._spark.read.schema(spark_schema()).parquet(str(path))
        return df, lambda: path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._dir is not None and os.path.isdir(self._dir):
            shutil.rmtree(self._dir, ignore_errors=True)


__all__ = [
    "INLINE_BYTES",
    "FrameMaker",
    "Handoff",
    "SessionLike",
    "choose",
    "inline_batches",
    "session_kind",
    "spark_schema",
    "sweep_dead",
]
