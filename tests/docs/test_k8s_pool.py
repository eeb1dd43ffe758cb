"""The process-pool kit (examples/statefulset-pool.yaml) fits the library: its variables are ones the
library reads and validate, its command is one `static-consumer run` accepts and runs the example app's
handler with a core per worker, readiness is the pool's ready file, the pool exits within the grace
period, and docs/pool.md's scale-down recipes are commands the CLI accepts."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from test_k8s_manifests import EXAMPLES, PREFIX, consumer_app, library_env_names, load

from static_consumer.admin.cli import build_parser
from static_consumer.settings import ConsumerSettings

POOL = load("statefulset-pool.yaml")
POOL_CONFIG = {k: str(v) for k, v in POOL["ConfigMap"]["data"].items()}


def pool_container() -> dict[str, Any]:
    (container,) = POOL["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    return dict(container)


def pool_command() -> Any:
    from static_consumer.command import build_run_parser

    command = pool_container()["command"]
    assert command[:2] == ["static-consumer", "run"]
    return build_run_parser().parse_args(command[2:])  # raises SystemExit on a flag `run` does not have


def test_the_pool_kit_sets_only_variables_the_library_reads_and_they_validate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    container = pool_container()
    (source,) = container["envFrom"]
    assert source["configMapRef"]["name"] == POOL["ConfigMap"]["metadata"]["name"]
    names = {n for n in POOL_CONFIG if n.startswith(PREFIX)}
    assert names <= library_env_names(), sorted(names - library_env_names())
    for key in [k for k in os.environ if k.startswith(PREFIX)]:
        monkeypatch.delenv(key)
    for key, value in POOL_CONFIG.items():
        monkeypatch.setenv(key, value)
    settings = ConsumerSettings.load()
    assert settings.assignment_mode == "group"  # the pool refuses ordinal mode with several processes
    env = {v["name"]: v.get("valueFrom") for v in container["env"]}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_the_pool_kit_runs_the_apps_handler_and_gives_every_worker_a_core() -> None:
    from static_consumer.pool import plan_workers

    args = pool_command()
    module, _, name = args.handler.partition(":")
    assert args.app_dir == "/app" and module == "consumer_app"
    assert callable(getattr(consumer_app(), name)), "the handler the pods run is the example app's"
    resources = pool_container()["resources"]
    assert float(resources["requests"]["cpu"]) >= args.processes
    settings = ConsumerSettings(
        bootstrap_servers="k:9092",
        group_id=POOL_CONFIG[f"{PREFIX}GROUP_ID"],
        topics=("orders",),
        instance_id_template=POOL_CONFIG[f"{PREFIX}INSTANCE_ID_TEMPLATE"],
    )
    workers = plan_workers(settings, {"POD_NAME": "orders-1"}, args.processes)
    assert [w.instance_id for w in workers] == [f"orders-1-{k}" for k in range(args.processes)]


def test_the_pool_kit_probes_the_pools_ready_file_and_exits_within_the_grace_period() -> None:
    args, container = pool_command(), pool_container()
    assert container["readinessProbe"]["exec"]["command"] == ["test", "-f", args.ready_file]
    mounts = [m["mountPath"].rstrip("/") + "/" for m in container["volumeMounts"]]
    assert all(any(f.startswith(m) for m in mounts) for f in (args.ready_file, args.status_file))
    assert "livenessProbe" not in container
    grace_s = POOL["StatefulSet"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert float(POOL_CONFIG[f"{PREFIX}SHUTDOWN_TIMEOUT_S"]) < grace_s


def test_the_scale_down_recipes_of_the_pool_page_are_commands_the_cli_accepts() -> None:
    text = (EXAMPLES.parent / "docs" / "pool.md").read_text()
    commands = re.findall(r"^\s*(static-consumer scale-down [^\n`]+)$", text, flags=re.M)
    assert commands, "docs/pool.md gives the scale-down recipe"
    for line in commands:
        args = build_parser().parse_args(line.split()[1:])
        assert args.command == "scale-down" and args.statefulset == "orders"
    assert "examples/statefulset-pool.yaml" in text
