"""``static-consumer``: operate static members (probe, describe, remove-members, scale-down, redrive, demo).

(``static-consumer run``, the pod main, is :mod:`static_consumer.command`, the script's entry point,
which hands every other command to :func:`main` here.)

Reads the same settings as the library: ``STATIC_CONSUMER_*`` environment variables (security settings
included; passwords only from the environment, never from flags), overridden by the flags given. Exit
codes (see docs/cli.md): 0 ok, 1 the audit found problems (``describe --check``), 2 usage, 69 the broker
cannot do it, 70 unexpected failure, 75 temporary failure (broker unreachable; retry), 78 configuration
(bad settings, unknown instance id), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from static_consumer._base.errors import (
    EXIT_CONFIG,
    EXIT_FATAL,
    EXIT_OK,
    EXIT_TEMPFAIL,
    ConfigurationError,
    StaticConsumerError,
)
from static_consumer._core.modes import group_mode
from static_consumer._kafka import probe as _probe
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.groups import RemovalResult
from static_consumer._security.secrets import ISSUED_TOKENS, env_secrets, scrub
from static_consumer.admin import _render as render
from static_consumer.admin import audit
from static_consumer.admin import members as admin
from static_consumer.admin.redrive import RedriveResult
from static_consumer.admin.redrive import redrive as redrive_records
from static_consumer.settings import ConsumerSettings

EXIT_AUDIT = 1  # describe --check: the audit found problems, or the group is rebalancing
EXIT_USAGE = 2  # argparse's own code for a bad command line
EXIT_INTERRUPTED = 130
DEMO_MODULE = "static_consumer_lab.demo"
DEMO_EXTRA = "./ './lab[demo]' (from a checkout: the package index does not have it yet)"
PROBE_GROUP = "static-consumer-cli"  # probe needs no group; ConsumerSettings requires one
# settings field -> flag; each overrides STATIC_CONSUMER_<FIELD>
CONNECTION_FLAGS = {
    "bootstrap_servers": "--bootstrap-servers",
    "security_protocol": "--security-protocol",
    "sasl_mechanism": "--sasl-mechanism",
    "sasl_username": "--sasl-username",
    "ssl_ca_location": "--ssl-ca-location",
    "ssl_certificate_location": "--ssl-certificate-location",
    "ssl_key_location": "--ssl-key-location",
    "ssl_endpoint_identification": "--[no-]ssl-endpoint-identification",
    "connect_timeout_s": "--connect-timeout-s",
}
COMMAND_FIELDS = (
    "protocol",
    "static_policy",
    "session_timeout_ms",
    "expected_restart_ms",
    "instance_id_template",
)


def _probe_with_version(settings: ConsumerSettings) -> BrokerCapabilities:
    """The probe of the ``probe`` command: as a consumer of ``settings`` asks it, and through kafka-python,
    which also names the Kafka version the ApiVersions look like."""
    overrides = group_mode(settings).group_overrides
    return _probe.probe(settings, group_overrides=overrides, broker_version=True)


@dataclass(frozen=True)
class Operations:
    """The I/O the commands perform; a seam for tests."""

    probe: Callable[[ConsumerSettings], BrokerCapabilities] = _probe_with_version
    audit_group: Callable[..., audit.GroupAudit] = audit.audit_group
    remove_members: Callable[..., RemovalResult] = admin.remove_members
    scale_down: Callable[..., RemovalResult] = admin.scale_down
    redrive: Callable[..., RedriveResult] = redrive_records


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    common.add_argument("-v", "--verbose", action="store_true", help="log client details to stderr")
    conn = common.add_argument_group("connection (override STATIC_CONSUMER_* variables)")
    conn.add_argument("-b", "--bootstrap-servers", metavar="HOST:PORT,...")
    conn.add_argument("--security-protocol", choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
    conn.add_argument("--sasl-mechanism", choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    conn.add_argument("--sasl-username", help="password: STATIC_CONSUMER_SASL_PASSWORD only")
    conn.add_argument("--ssl-ca-location", metavar="PEM")
    conn.add_argument("--ssl-certificate-location", metavar="PEM")
    conn.add_argument("--ssl-key-location", metavar="PEM")
    conn.add_argument(
        "--ssl-endpoint-identification",
        action=argparse.BooleanOptionalAction,
        help="check that the brokers' certificates name their hosts (default: on)",
    )
    conn.add_argument("--connect-timeout-s", type=float, metavar="SECONDS")
    group = argparse.ArgumentParser(add_help=False)
    group.add_argument("group", nargs="?", help="consumer group id (default: STATIC_CONSUMER_GROUP_ID)")

    parser = argparse.ArgumentParser(
        prog="static-consumer", description="Operate Kafka consumer groups with static members (KIP-345)."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    probe = sub.add_parser("probe", parents=[common], help="can the brokers do static membership?")
    probe.add_argument("--protocol", choices=["classic", "consumer"])
    probe.add_argument("--static-policy", choices=["require", "warn", "dynamic"])
    probe.add_argument("--session-timeout-ms", type=int)
    probe.add_argument("--expected-restart-ms", type=int)

    describe = sub.add_parser(
        "describe", parents=[common, group], help="members, instance ids, assignment and the live audit"
    )
    describe.add_argument("--topic", action="append", default=[], help="a topic the group must consume")
    describe.add_argument("--check", action="store_true", help=f"exit {EXIT_AUDIT} unless the audit is ok")

    remove = sub.add_parser(
        "remove-members", parents=[common, group], help="LeaveGroup on behalf of dead static members"
    )
    remove.add_argument("--instance-id", action="append", required=True, dest="instance_ids", metavar="ID")
    remove.add_argument("--reason", default=admin.DEFAULT_REASON)

    scale = sub.add_parser(
        "scale-down", parents=[common, group], help="remove the members of a shrunk StatefulSet's pods"
    )
    scale.add_argument("--statefulset", help="StatefulSet name (needed for templates with {pod})")
    scale.add_argument("--replicas", type=int, help="remove every member whose ordinal is >= REPLICAS")
    scale.add_argument("--ordinal", type=int, action="append", default=[], dest="ordinals")
    scale.add_argument(
        "--processes",
        type=int,
        help="the pods run `static-consumer run --processes N`: also remove the ids their pools do not use "
        "(workers >= N, the pods' own single-process ids)",
    )
    scale.add_argument("--instance-id-template", help="default: STATIC_CONSUMER_INSTANCE_ID_TEMPLATE")

    redrive = sub.add_parser(
        "redrive",
        parents=[common],
        help="send dead-lettered records back to their source topics (docs/failures.md)",
    )
    redrive.add_argument("dead_letter_topic", metavar="DEAD_LETTER_TOPIC")
    redrive.add_argument(
        "--group",
        help="the consumer group that dead-lettered them (default: STATIC_CONSUMER_GROUP_ID); the run reads "
        "as GROUP.redrive, so the next run goes on where this one stopped",
    )
    redrive.add_argument("--dry-run", action="store_true", help="count what would be sent; send nothing")
    redrive.add_argument("--timeout-s", type=float, default=300.0, help="bound for the whole run")

    sub.add_parser("demo", help="run the demo (see `static-consumer demo --help`)", add_help=False)
    sub.add_parser(
        "run",
        help="a pod's main: N static members in worker processes (see `static-consumer run --help`)",
        add_help=False,
    )
    return parser


def load_settings(args: argparse.Namespace) -> ConsumerSettings:
    """ConsumerSettings from the environment (as the library reads it), the flags given winning."""
    overrides: dict[str, Any] = {
        field: getattr(args, field)
        for field in (*CONNECTION_FLAGS, *COMMAND_FIELDS)
        if getattr(args, field, None) is not None
    }
    group_in_env = bool(os.environ.get("STATIC_CONSUMER_GROUP_ID", "").strip())
    if getattr(args, "group", None):
        overrides["group_id"] = args.group
    elif args.command == "probe" and not group_in_env:
        overrides["group_id"] = PROBE_GROUP
    elif not group_in_env:
        raise ConfigurationError("no group: give GROUP on the command line or set STATIC_CONSUMER_GROUP_ID")
    try:
        return ConsumerSettings.load(**overrides)
    except ConfigurationError as exc:
        flags = ", ".join(CONNECTION_FLAGS.values())
        raise ConfigurationError(f"{exc}\n(on the command line, {flags} override the environment)") from None


def _removal_exit(result: RemovalResult) -> int:
    if result.ok:
        return EXIT_OK
    return EXIT_TEMPFAIL if all(f.retriable for f in result.failed) else EXIT_FATAL


def run(args: argparse.Namespace, ops: Operations, out: TextIO) -> int:
    """Run one parsed command; StaticConsumerError propagates to :func:`main`."""
    settings = load_settings(args)
    data: Any
    if args.command == "probe":
        data = render.probe_report(settings, ops.probe(settings))
        error = data["configured"]["error"]
        code, text = (error["exit_code"] if error else EXIT_OK), render.render_probe(data)
    elif args.command == "describe":
        result = ops.audit_group(settings, settings.group_id, topics=args.topic)
        data = {"group": result.description.to_dict(), "audit": result.to_dict()}
        code = EXIT_AUDIT if args.check and not result.ok else EXIT_OK
        text = render.render_describe(result)
    elif args.command == "redrive":
        redriven = ops.redrive(
            settings, args.dead_letter_topic, dry_run=args.dry_run, timeout_s=args.timeout_s
        )
        data, code = redriven.to_dict(), EXIT_OK
        verb = "would send" if args.dry_run else "sent"
        text = "\n".join(
            [
                f"{verb} {redriven.total} record{'' if redriven.total == 1 else 's'} from "
                f"{args.dead_letter_topic} (group {redriven.group}):"
            ]
            + [f"  {where}: {n}" for where, n in sorted(redriven.sent.items())]
            + ([f"  passed over (no dlt.original.* headers): {redriven.foreign}"] if redriven.foreign else [])
        )
    elif args.command == "remove-members":
        removal = ops.remove_members(
            settings, args.instance_ids, group_id=settings.group_id, reason=args.reason
        )
        data, code, text = removal.to_dict(), _removal_exit(removal), render.render_removal(removal)
    else:  # scale-down
        removal = ops.scale_down(
            settings,
            settings.group_id,
            replicas=args.replicas,
            ordinals=args.ordinals,
            statefulset=args.statefulset,
            processes=args.processes,
        )
        data, code, text = removal.to_dict(), _removal_exit(removal), render.render_removal(removal)
    if args.json:
        out.write(json.dumps({**data, "exit_code": code}, indent=2) + "\n")
    else:
        out.write(text + "\n")
    return code


def _configure_logging(verbose: bool, err: TextIO) -> None:
    level = logging.DEBUG if verbose else logging.WARNING
    logging.basicConfig(level=level, stream=err, format="%(name)s: %(message)s")
    if not verbose:  # kafka-python and librdkafka narrate every reconnect; the error message says enough
        for name in ("kafka", "static_consumer.admin.librdkafka"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def main(
    argv: Sequence[str] | None = None,
    *,
    ops: Operations | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Console entry point; returns the exit code (the ``static-consumer`` script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    out, err = stdout or sys.stdout, stderr or sys.stderr
    if args_list[:1] == ["demo"]:
        return _demo(args_list[1:], err)
    if args_list[:1] == ["run"]:
        # The pod main lives above the operator tools (static_consumer.command, the script's entry point):
        # a pod that runs it must not load them.
        err.write("static-consumer run: run it with the static-consumer script (static_consumer.command)\n")
        return EXIT_USAGE
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    _configure_logging(args.verbose, err)
    try:
        return run(args, ops or Operations(), out)
    except StaticConsumerError as exc:
        return _fail(args, out, err, render.error_dict(exc), exc.exit_code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a CLI reports, with a documented code, instead of a traceback
        if args.verbose:
            raise
        info = {"type": type(exc).__name__, "message": str(exc), "exit_code": EXIT_FATAL}
        return _fail(args, out, err, info, EXIT_FATAL)


def _demo(argv: list[str], err: TextIO) -> int:
    """``static-consumer demo``: the experiment lives in the lab distribution (static-consumer-lab), which
    the runtime wheel does not hold; it is imported only now (it is written separately, heavy imports)."""
    try:
        demo: Any = importlib.import_module(DEMO_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name not in (DEMO_MODULE, DEMO_MODULE.partition(".")[0]):
            raise  # something the demo itself needs: its own error says what
        err.write(f"static-consumer demo: the demo is not installed; pip install {DEMO_EXTRA}\n")
        return EXIT_CONFIG
    return int(demo.main(argv) or 0)


def _fail(args: argparse.Namespace, out: TextIO, err: TextIO, info: dict[str, Any], code: int) -> int:
    # The library's errors are masked where they are raised; an unexpected one is masked here, with the
    # secrets the environment holds (the settings may be what failed to build) and any token handed out.
    info = {**info, "message": ISSUED_TOKENS.scrub(scrub(str(info["message"]), env_secrets(os.environ)))}
    if args.json:
        out.write(json.dumps({"error": info, "exit_code": code}, indent=2) + "\n")
    else:
        err.write(f"static-consumer {args.command}: {info['type']}: {info['message']}\n")
    return code


__all__ = ["EXIT_AUDIT", "EXIT_USAGE", "Operations", "build_parser", "load_settings", "main", "run"]


if __name__ == "__main__":
    raise SystemExit(main())
