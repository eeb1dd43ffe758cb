"""The ``static-consumer`` script: ``run``, the pod main, here; every other command is an operator tool.

``static-consumer run --processes N module:handler`` runs a pod's consumers: N static members in worker
processes (:func:`static_consumer.pool.run_pool`), each calling ``handler(batch)`` with a list of
Records, settings from the ``STATIC_CONSUMER_*`` environment as a single-process pod reads them. The
other commands (probe, describe, remove-members, scale-down, demo) are :mod:`static_consumer.admin.cli`,
imported only for them: a pod that runs ``static-consumer run`` does not load the operator tools, and
kafka-python only for ``--event-log`` (a DescribeGroups per join), the capability check's fallback, and
the KIP-848 leave and wait for a held instance id (docs/cli.md). Exit codes: those of the pool
(docs/pool.md#exit-codes), 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from static_consumer._base.errors import ConfigurationError, StaticConsumerError, exit_code_for
from static_consumer._core.events import MembershipListener
from static_consumer._security.secrets import ISSUED_TOKENS, env_secrets, scrub
from static_consumer.pool import WorkerInfo, run_pool
from static_consumer.settings import ConsumerSettings

log = logging.getLogger("static_consumer.run")
EXIT_USAGE = 2


def build_run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="static-consumer run",
        description="Run this pod's consumers: N static members in worker processes, instance ids "
        "'{pod id}-0' .. '{pod id}-(N-1)', each calling HANDLER(batch) and committing after it returns. "
        "Settings come from the STATIC_CONSUMER_* environment. SIGTERM: every worker finishes its batch, "
        "commits and closes without leaving the group, within STATIC_CONSUMER_SHUTDOWN_TIMEOUT_S.",
    )
    parser.add_argument("handler", metavar="MODULE:HANDLER", help="e.g. consumer_app:handle_batch")
    parser.add_argument(
        "-n", "--processes", type=int, default=1, help="worker processes, one static member each (default 1)"
    )
    parser.add_argument(
        "--app-dir", default=".", help="directory put first on sys.path to import MODULE (default: .)"
    )
    parser.add_argument(
        "--setup",
        metavar="MODULE:FUNCTION",
        help="called in each worker with its WorkerInfo before it consumes",
    )
    parser.add_argument("--ready-file", metavar="PATH", help="exists while every worker has joined")
    parser.add_argument("--status-file", metavar="PATH", help="every worker's status, as JSON")
    parser.add_argument(
        "--event-log", metavar="PATH", help="append every worker's membership events to PATH (JSONL)"
    )
    parser.add_argument("--max-records", type=int, default=500, help="records per batch at most")
    parser.add_argument("--poll-timeout-s", type=float, default=1.0)
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    return parser


def load_callable(spec: str, app_dir: str | None = None) -> Callable[..., Any]:
    """``module:attribute`` (the attribute may be dotted) imported; ConfigurationError if it is not there."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"{spec!r} is not MODULE:NAME (e.g. consumer_app:handle_batch)")
    if app_dir is not None:
        sys.path.insert(0, os.path.abspath(app_dir))
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise  # something the module itself imports is missing: its own error says what
        raise ConfigurationError(
            f"cannot import {module_name!r} (from {app_dir or 'sys.path'}): {exc}"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigurationError(f"{module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigurationError(f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def _event_log(path: str) -> Callable[[WorkerInfo], Sequence[MembershipListener]]:
    def listeners(info: WorkerInfo) -> Sequence[MembershipListener]:
        from static_consumer.telemetry import EventLog  # opened in the worker, after the fork

        return [EventLog(path)]

    return listeners


def run(argv: Sequence[str], *, stderr: TextIO | None = None) -> int:
    """``static-consumer run``: the pool's exit code."""
    err = stderr or sys.stderr
    try:
        args = build_run_parser().parse_args(list(argv))
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    logging.basicConfig(
        level=args.log_level.upper(), stream=err, format="%(levelname)s %(processName)s %(name)s: %(message)s"
    )
    multiprocessing.current_process().name = "pool"  # the supervisor, in the log lines
    try:
        handler = load_callable(args.handler, args.app_dir)
        setup = load_callable(args.setup) if args.setup else None
        return run_pool(
            ConsumerSettings.load(),
            handler,
            processes=args.processes,
            ready_file=args.ready_file,
            status_file=args.status_file,
            setup=setup,
            listeners=_event_log(args.event_log) if args.event_log else None,
            max_records=args.max_records,
            poll_timeout_s=args.poll_timeout_s,
        )
    except StaticConsumerError as exc:  # found before any worker started: settings, identity, the handler
        err.write(f"static-consumer run: {type(exc).__name__}: {exc}\n")
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - reported with its exit code, masked like every CLI error
        masked = ISSUED_TOKENS.scrub(scrub(f"{type(exc).__name__}: {exc}", env_secrets(os.environ)))
        err.write(f"static-consumer run: {masked}\n")
        log.debug("static-consumer run failed", exc_info=True)
        return exit_code_for(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit code (the ``static-consumer`` script exits with it)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"]:
        return run(args[1:])
    from static_consumer.admin.cli import main as operate

    return operate(args)


__all__ = ["build_run_parser", "load_callable", "main", "run"]


if __name__ == "__main__":
    raise SystemExit(main())
