"""The event-log schema, once: the docs table and the Spark DDL are generated from :data:`FIELDS`."""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    json: str
    spark: str
    meaning: str


_PARTITIONS = "ARRAY<STRUCT<`topic`: STRING, `partition`: INT>>"

FIELDS: tuple[Field, ...] = (
    Field("v", "int", "INT", "Schema version (1). Every line."),
    Field(
        "ts",
        "string",
        "STRING",
        "When the event happened: RFC 3339 UTC with microseconds, e.g. `2025-06-01T12:00:00.123456Z`.",
    ),
    Field(
        "event",
        "string",
        "STRING",
        "`joining`, `assigned`, `revoked`, `lost`, `fenced`, `fatal`, `closed`, `stalled`, "
        "`commit_refused`, `batch` (a Spark bridge micro-batch was processed), or a failing handler's "
        "`retried`, `dead_lettered`, `skipped` (docs/failures.md).",
    ),
    Field("group", "string", "STRING", "Consumer group id."),
    Field("instance_id", "string or null", "STRING", "`group.instance.id`; null for a dynamic member."),
    Field(
        "member_id",
        "string or null",
        "STRING",
        "Member id the coordinator gave this client; null before the first join. New on every join.",
    ),
    Field(
        "generation",
        "int or null",
        "INT",
        "Group generation (classic protocol; during `revoked` still the old one) or member epoch "
        "(consumer protocol) when the event happened; null before the first join.",
    ),
    Field(
        "protocol",
        "string or null",
        "STRING",
        "`classic` or `consumer`, from the last `joining`; null without one (manual assignment).",
    ),
    Field(
        "partitions",
        "list of {topic, partition} or null",
        _PARTITIONS,
        "`assigned`/`revoked`/`lost`: the partitions of the event. `joining`: the partitions the "
        "broker held for the instance id (when `held`). `commit_refused`: the partitions of the "
        "refused commit. `retried`/`dead_lettered`/`skipped`: the failing record's partition. Else null.",
    ),
    Field(
        "held",
        "bool or null",
        "BOOLEAN",
        "`joining` only: whether the broker still held the instance id; null when not asked "
        "(dynamic member, look-up off or failed).",
    ),
    Field(
        "join_kind",
        "string or null",
        "STRING",
        "On the `assigned` line that completed a join: `static_rejoin`, `static_join`, "
        "`dynamic_join`, `manual` or `unknown`. Else absent or null.",
    ),
    Field("rebalance", "bool", "BOOLEAN", "True on the `assigned` line that completed a rebalance."),
    Field("moved", "int or null", "INT", "With `rebalance`: partitions gained plus partitions given up."),
    Field(
        "duration_s",
        "float or null",
        "DOUBLE",
        "Seconds the join (from `joining`) or the rebalance (from its first revoke or loss) took.",
    ),
    Field(
        "failed",
        "string or null",
        "STRING",
        "`lost`, `fenced` or `fatal` when this event failed a rebalance or join. Else absent.",
    ),
    Field(
        "error",
        "string or null",
        "STRING",
        "`fenced`/`fatal`: the client's error text. `commit_refused`: Kafka's name for the refusal "
        "(e.g. `UNKNOWN_MEMBER_ID`). `retried`/`dead_lettered`/`skipped`: the handler's exception as "
        "`Type: message` (secrets masked).",
    ),
    Field(
        "offsets",
        "list of {topic, partition, offset} or null",
        "ARRAY<STRUCT<`topic`: STRING, `partition`: INT, `offset`: BIGINT>>",
        "`commit_refused`: the offsets that were not committed (their records come again). "
        "`retried`/`dead_lettered`/`skipped`: the failing record (the one the handler named, else the "
        "first of the call).",
    ),
    Field(
        "left_group",
        "bool or null",
        "BOOLEAN",
        "`closed` only: whether the member left the group (false for a normal static close).",
    ),
    Field("batch_id", "int", "INT", "`batch` only: the runner's batch number (from 0 per run)."),
    Field(
        "records",
        "int",
        "BIGINT",
        "`batch`: records handed to fn. `retried`: records the next attempt gets.",
    ),
    Field("bytes", "int", "BIGINT", "`batch` only: payload bytes (keys, values, headers) of the batch."),
    Field("collect_s", "float", "DOUBLE", "`batch` only: seconds spent collecting the batch."),
    Field("process_s", "float", "DOUBLE", "`batch` only: seconds fn took (retries included)."),
    Field(
        "commit_s", "float", "DOUBLE", "`batch` only: seconds for the checkpoint write and the Kafka commit."
    ),
    Field(
        "input_rows_per_s",
        "float",
        "DOUBLE",
        "`batch` only: arrival rate, records over the time since the previous batch was handed to fn.",
    ),
    Field("processing_rows_per_s", "float", "DOUBLE", "`batch` only: records / process_s."),
    Field(
        "lag",
        "int or null",
        "BIGINT",
        "`batch` only: records behind the batch in its partitions (end offsets looked up at most every "
        "`lag_interval_s`); null while unknown.",
    ),
    Field("committed", "bool", "BOOLEAN", "`batch` only: whether the Kafka commit of the batch succeeded."),
    Field(
        "version",
        "int or null",
        "BIGINT",
        "`batch` only: the batch key's version (restart-stable, with a checkpoint); else null.",
    ),
    Field(
        "gap_s",
        "float or null",
        "DOUBLE",
        "`stalled` only: seconds between two client calls (over half the session timeout); for "
        "`expired`, how long the partitions stayed disowned.",
    ),
    Field(
        "verdict",
        "string or null",
        "STRING",
        "`stalled` only: `ok`, `lost`, `gone`, `unknown` or `expired` (docs/semantics.md, pauses).",
    ),
    Field("dropped", "int or null", "INT", "`stalled` only: records fetched before the gap not handed out."),
    Field(
        "rewound",
        "list of {topic, partition, offset} or null",
        "ARRAY<STRUCT<`topic`: STRING, `partition`: INT, `offset`: BIGINT>>",
        "`stalled` only: where partitions were sent back to, so that no dropped record is skipped.",
    ),
    Field("waited_s", "float or null", "DOUBLE", "`stalled` only: seconds the check took."),
    Field(
        "attempts",
        "int or null",
        "INT",
        "`retried`: failed attempts so far. `dead_lettered`/`skipped`: attempts before the record was "
        "given up on.",
    ),
    Field("wait_s", "float or null", "DOUBLE", "`retried` only: seconds before the next attempt."),
    Field(
        "dead_letter",
        "{topic, partition, offset} or null",
        "STRUCT<`topic`: STRING, `partition`: INT, `offset`: BIGINT>",
        "`dead_lettered` only: where the record was written (acknowledged).",
    ),
)

# spark.read.schema(EVENT_LOG_SPARK_SCHEMA).json(path) reads every version-1 log.
EVENT_LOG_SPARK_SCHEMA = ", ".join(f"`{f.name}` {f.spark}" for f in FIELDS)


def schema_reference() -> str:
    """The Markdown table of docs/observability.md."""
    rows = ["| field | JSON type | meaning |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {f.json} | {f.meaning} |" for f in FIELDS]
    return "\n".join(rows)


__all__ = ["EVENT_LOG_SPARK_SCHEMA", "FIELDS", "SCHEMA_VERSION", "Field", "schema_reference"]
