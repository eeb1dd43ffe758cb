"""The Kubernetes kit in examples/ fits the library: every variable the manifests set is one the library
reads, the values validate, the timeouts hold together, readiness matches the app, the Job's command is
one the CLI accepts and targets the StatefulSet's own pods."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from static_consumer.admin._ordinals import ordinal_of, ordinal_pattern
from static_consumer.admin.cli import build_parser
from static_consumer.identity import INSTANCE_ID_ENV, POD_NAME_ENVS, resolve_identity
from static_consumer.settings import ConsumerSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PREFIX = "STATIC_CONSUMER_"


def load(name: str) -> dict[str, dict[str, Any]]:
    """``{kind: document}`` (every kind appears once per file in the kit)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    by_kind = {d["kind"]: d for d in docs}
    assert len(by_kind) == len(docs), f"{name}: a kind appears twice"
    return by_kind


STS = load("statefulset.yaml")
JOB = load("scale-down-job.yaml")
CONFIG = {k: str(v) for k, v in STS["ConfigMap"]["data"].items()}


def containers(doc: dict[str, Any], init: bool = False) -> list[dict[str, Any]]:
    spec = doc["spec"]["template"]["spec"]
    return list(spec.get("initContainers", []) if init else spec["containers"])


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """The container's environment: ConfigMap values (envFrom), then literal values and valueFrom specs."""
    env: dict[str, Any] = {}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == STS["ConfigMap"]["metadata"]["name"]
        env.update(CONFIG)
    for var in container.get("env", []):
        env[var["name"]] = var.get("value", var.get("valueFrom"))
    return env


def consumer() -> dict[str, Any]:
    (container,) = containers(STS["StatefulSet"])
    return container


def library_env_names() -> set[str]:
    return {PREFIX + field.upper() for field in ConsumerSettings.model_fields} | {INSTANCE_ID_ENV}


@pytest.mark.parametrize("where", ["StatefulSet", "Job"])
def test_every_static_consumer_variable_is_one_the_library_reads(where: str) -> None:
    doc = STS["StatefulSet"] if where == "StatefulSet" else JOB["Job"]
    names = {
        n for c in containers(doc) + containers(doc, init=True) for n in env_of(c) if n.startswith(PREFIX)
    }
    assert names, "the manifest configures the library through STATIC_CONSUMER_* variables"
    assert names <= library_env_names(), (
        f"unknown (misspelled?) variables: {sorted(names - library_env_names())}"
    )


def test_the_configmap_is_a_valid_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in CONFIG.items():
        monkeypatch.setenv(key, value)
    settings = ConsumerSettings.load()
    assert settings.static_policy == "require" and settings.topics == ("orders",)
    assert (
        settings.expected_restart_ms is not None
        and settings.session_timeout_ms >= settings.expected_restart_ms
    )


def test_instance_id_is_the_pod_name_from_the_downward_api() -> None:
    env = env_of(consumer())
    pod_var = next(name for name in POD_NAME_ENVS if name in env)
    assert env[pod_var] == {"fieldRef": {"fieldPath": "metadata.name"}}
    name = STS["StatefulSet"]["metadata"]["name"]
    identity = resolve_identity(
        {pod_var: f"{name}-2"},
        group_id=CONFIG[f"{PREFIX}GROUP_ID"],
        template=CONFIG[f"{PREFIX}INSTANCE_ID_TEMPLATE"],
    )
    assert (identity.instance_id, identity.statefulset, identity.ordinal) == (f"{name}-2", name, 2)


def test_grace_period_covers_the_shutdown_and_the_session_timeout_covers_a_restart() -> None:
    grace_s = STS["StatefulSet"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    shutdown_s = float(CONFIG[f"{PREFIX}SHUTDOWN_TIMEOUT_S"])
    session_s = int(CONFIG[f"{PREFIX}SESSION_TIMEOUT_MS"]) / 1000
    restart_s = int(CONFIG[f"{PREFIX}EXPECTED_RESTART_MS"]) / 1000
    assert shutdown_s < grace_s, "SIGKILL would interrupt the final commit"
    assert grace_s < restart_s <= session_s, "a restart would expire the member and rebalance the group"


def test_readiness_probe_tests_the_file_the_app_writes() -> None:
    spec = importlib.util.spec_from_file_location("consumer_app", EXAMPLES / "consumer_app.py")
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)

    container = consumer()
    ready_file = env_of(container)[app.READY_FILE_ENV]
    assert container["readinessProbe"]["exec"]["command"] == ["test", "-f", ready_file]
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert any(ready_file.startswith(m.rstrip("/") + "/") for m in mounts), (
        "the ready file needs a writable mount"
    )
    assert "livenessProbe" not in container
    assert STS["StatefulSet"]["spec"]["podManagementPolicy"] == "Parallel"


def test_scale_down_job_runs_a_valid_cli_command_against_the_statefulsets_pods() -> None:
    (leave,) = containers(JOB["Job"])
    env = env_of(leave)
    argv = [re.sub(r"\$\((\w+)\)", lambda m: str(env[m.group(1)]), a) for a in leave["command"]]
    assert argv[0] == "static-consumer"
    args = build_parser().parse_args(argv[1:])  # raises SystemExit on a flag the CLI does not have
    name = STS["StatefulSet"]["metadata"]["name"]
    assert (args.command, args.statefulset, args.replicas) == ("scale-down", name, int(env["REPLICAS"]))

    (scale,) = containers(JOB["Job"], init=True)
    assert env_of(scale)["STATEFULSET"] == name and env_of(scale)["REPLICAS"] == env["REPLICAS"]
    assert "kubectl scale statefulset" in scale["args"][0]

    # the pods the Job removes are exactly the ones with ordinal >= REPLICAS
    pattern = ordinal_pattern(
        CONFIG[f"{PREFIX}INSTANCE_ID_TEMPLATE"], statefulset=name, group_id=CONFIG[f"{PREFIX}GROUP_ID"]
    )
    replicas = STS["StatefulSet"]["spec"]["replicas"]
    dropped = [
        f"{name}-{k}" for k in range(replicas) if (ordinal_of(f"{name}-{k}", pattern) or 0) >= args.replicas
    ]
    assert dropped == [f"{name}-{k}" for k in range(args.replicas, replicas)]


def test_scale_down_job_may_scale_the_statefulset_and_see_its_pods() -> None:
    name = STS["StatefulSet"]["metadata"]["name"]
    rules = JOB["Role"]["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}
    assert {("statefulsets", "get"), ("statefulsets/scale", "patch"), ("pods", "get")} <= granted
    assert all(rule.get("resourceNames", [name]) == [name] for rule in rules)
    assert (
        JOB["Job"]["spec"]["template"]["spec"]["serviceAccountName"]
        == JOB["ServiceAccount"]["metadata"]["name"]
    )
    assert JOB["RoleBinding"]["roleRef"]["name"] == JOB["Role"]["metadata"]["name"]
    assert JOB["Job"]["spec"]["activeDeadlineSeconds"] > 0  # bounds the wait for the dropped pods


def test_init_script_scales_then_waits_for_exactly_the_dropped_pods(tmp_path: Path) -> None:
    """Run the init container's script with a fake kubectl: 4 replicas -> REPLICAS, pods linger a while."""
    (scale,) = containers(JOB["Job"], init=True)
    log = tmp_path / "kubectl.log"
    fake = tmp_path / "kubectl"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$1 $2" in\n'
        '  "get statefulset") echo 4 ;;\n'
        # each dropped pod is still there on the first look, gone on the second
        f'  "get pod") n=$(grep -c "get pod $3" {log}); [ "$n" -lt 2 ] ;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    env = {k: str(v) for k, v in env_of(scale).items()} | {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    done = subprocess.run(
        [*scale["command"], scale["args"][0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    name, replicas = env["STATEFULSET"], int(env["REPLICAS"])
    calls = log.read_text().splitlines()
    assert calls[1] == f"scale statefulset {name} --replicas={replicas}"
    waited = sorted({c.split()[2] for c in calls if c.startswith("get pod")})
    assert waited == [f"{name}-{k}" for k in range(replicas, 4)]


# ------------------------------------------------------------------------------ secured cluster kit
SECURE = load("statefulset-tls.yaml")
DOCS = EXAMPLES.parent / "docs" / "security.md"


def secure_env() -> tuple[dict[str, str], dict[str, Any]]:
    """The consumer's ConfigMap values and its other variables (literal values and valueFrom specs)."""
    (container,) = containers(SECURE["StatefulSet"])
    (source,) = container["envFrom"]
    assert source["configMapRef"]["name"] == SECURE["ConfigMap"]["metadata"]["name"]
    config = {k: str(v) for k, v in SECURE["ConfigMap"]["data"].items()}
    return config, {var["name"]: var.get("value", var.get("valueFrom")) for var in container["env"]}


def test_the_secured_statefulset_sets_only_variables_the_library_reads() -> None:
    config, env = secure_env()
    names = {n for n in [*config, *env] if n.startswith(PREFIX)}
    assert names <= library_env_names(), f"unknown variables: {sorted(names - library_env_names())}"
    assert not [n for n in config if "PASSWORD" in n], "secrets belong in a Secret, not the ConfigMap"


def test_the_secured_statefulset_is_a_valid_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    config, env = secure_env()
    for key, value in config.items():
        monkeypatch.setenv(key, value)
    for name, value in env.items():
        if isinstance(value, dict) and "secretKeyRef" in value:
            monkeypatch.setenv(name, f"from-secret-{value['secretKeyRef']['key']}")
    settings = ConsumerSettings.load()
    assert (settings.security_protocol, settings.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert settings.sasl_password is not None and settings.ssl_endpoint_identification
    assert env["STATIC_CONSUMER_SASL_PASSWORD"]["secretKeyRef"]["key"] == "password"


def test_every_file_setting_points_into_a_mounted_secret() -> None:
    config, _ = secure_env()
    (container,) = containers(SECURE["StatefulSet"])
    volumes = {v["name"]: v for v in SECURE["StatefulSet"]["spec"]["template"]["spec"]["volumes"]}
    paths = [v for k, v in config.items() if k.endswith("_LOCATION")]
    assert paths, "the example mounts the CA certificate"
    for path in paths:
        mount = next(
            m for m in container["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/")
        )
        assert mount.get("readOnly") is True
        secret = volumes[mount["name"]]["secret"]  # a Secret volume, not a ConfigMap or emptyDir
        relative = path[len(mount["mountPath"].rstrip("/")) + 1 :]
        assert relative in [item["path"] for item in secret["items"]], f"{path} is not in {secret}"


def test_the_security_recipes_use_only_variables_the_library_reads() -> None:
    text = DOCS.read_text()
    names = set(re.findall(r"STATIC_CONSUMER_[A-Z_]+", text))
    assert names and names <= library_env_names(), sorted(names - library_env_names())
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        yaml.safe_load(block)  # every snippet is valid YAML
