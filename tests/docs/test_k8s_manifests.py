"""The Kubernetes kit in examples/ fits the library: every variable the manifests set is one the library
reads, the values validate, the timeouts hold together, readiness matches the app, the Job's command is
one the CLI accepts and targets the StatefulSet's own pods. The secured kits (SASL_SSL PLAIN, SCRAM,
mutual TLS, OAUTHBEARER) keep secrets in Secrets, mount every file they name, load through the app's own
settings loader, and the TLS scale-down Job reaches the cluster as their consumers do."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from static_consumer._base.errors import AuthenticationError
from static_consumer._core.identity import INSTANCE_ID_ENV, POD_NAME_ENVS, resolve_identity
from static_consumer._security.oauth import first_token
from static_consumer.admin._ordinals import ordinal_of, ordinal_pattern
from static_consumer.admin.cli import build_parser
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import admin_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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
    # restartPolicy: Always restarts an exit 82, so a duplicate stands by instead (docs/kubernetes.md)
    assert settings.duplicate_policy == "wait"
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


def consumer_app() -> Any:
    """examples/consumer_app.py as a module."""
    spec = importlib.util.spec_from_file_location("consumer_app", EXAMPLES / "consumer_app.py")
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app


def test_readiness_probe_tests_the_file_the_app_writes() -> None:
    app = consumer_app()
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


# ------------------------------------------------------------------------------ secured cluster kits
# file -> (security_protocol, sasl_mechanism, the variables that must come from a Secret)
SECURE_KITS = {
    "statefulset-sasl-plain.yaml": ("SASL_SSL", "PLAIN", {"STATIC_CONSUMER_SASL_PASSWORD"}),
    "statefulset-tls.yaml": ("SASL_SSL", "SCRAM-SHA-512", {"STATIC_CONSUMER_SASL_PASSWORD"}),
    "statefulset-mtls.yaml": ("SSL", None, {"STATIC_CONSUMER_SSL_KEY_PASSWORD"}),
    "statefulset-oauth.yaml": ("SASL_SSL", "OAUTHBEARER", {"OAUTH_CLIENT_SECRET"}),
}
TLS_JOB = load("scale-down-job-tls.yaml")
DOCS = EXAMPLES.parent / "docs" / "security.md"
SECRET_WORDS = ("PASSWORD", "SECRET")


def kit_env(kit: dict[str, dict[str, Any]], container: dict[str, Any]) -> dict[str, Any]:
    """A container's environment in ``kit``: its ConfigMap's values, then literal values and valueFrom."""
    (source,) = container["envFrom"]
    assert source["configMapRef"]["name"] == kit["ConfigMap"]["metadata"]["name"]
    config = {k: str(v) for k, v in kit["ConfigMap"]["data"].items()}
    return config | {var["name"]: var.get("value", var.get("valueFrom")) for var in container.get("env", [])}


def mounted_secret_files(pod_spec: dict[str, Any], container: dict[str, Any]) -> set[str]:
    """Every file path ``container`` sees from a Secret volume, read-only."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    paths = set()
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        if secret is not None:
            assert mount.get("readOnly") is True, mount
            paths |= {f"{mount['mountPath'].rstrip('/')}/{item['path']}" for item in secret["items"]}
    return paths


def secured_consumer(name: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    kit = load(name)
    (container,) = containers(kit["StatefulSet"])
    return kit, container


@pytest.mark.parametrize("name", list(SECURE_KITS))
def test_a_secured_statefulset_sets_only_variables_its_app_reads_and_keeps_secrets_in_secrets(
    name: str,
) -> None:
    kit, container = secured_consumer(name)
    env = kit_env(kit, container)
    names = {n for n in env if n.startswith(PREFIX)}
    assert names <= library_env_names(), f"unknown variables: {sorted(names - library_env_names())}"
    assert not [n for n in kit["ConfigMap"]["data"] if any(w in n for w in SECRET_WORDS)]
    from_secrets = {n for n, v in env.items() if isinstance(v, dict) and "secretKeyRef" in v}
    secret_like = {n for n in env if any(w in n for w in SECRET_WORDS)}
    assert secret_like == from_secrets == SECURE_KITS[name][2]


@pytest.mark.parametrize("name", list(SECURE_KITS))
def test_a_secured_statefulset_is_a_valid_configuration_for_its_app(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's own settings loader (examples/consumer_app.py), OAUTHBEARER's token provider included."""
    kit, container = secured_consumer(name)
    for key in [k for k in os.environ if k.startswith((PREFIX, "OAUTH_"))]:
        monkeypatch.delenv(key)
    for key, value in kit_env(kit, container).items():
        if isinstance(value, dict) and "secretKeyRef" in value:
            value = f"from-secret-{value['secretKeyRef']['key']}"
        if isinstance(value, str):
            monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(EXAMPLES))  # the image puts oauth_tokens.py next to the app
    settings = consumer_app().load_settings()
    protocol, mechanism, _ = SECURE_KITS[name]
    assert (settings.security_protocol, settings.sasl_mechanism) == (protocol, mechanism)
    assert settings.ssl_endpoint_identification and settings.static_policy == "require"
    assert settings.duplicate_policy == "wait"
    if mechanism == "OAUTHBEARER":
        tokens = settings.sasl_oauth_token_provider
        assert tokens is not None and type(tokens).__name__ == "ClientCredentialsTokens"
        assert "from-secret" not in repr(tokens) and repr(tokens).startswith(
            "ClientCredentialsTokens('https://"
        )
    elif mechanism is not None:
        assert settings.sasl_password is not None and settings.sasl_username


@pytest.mark.parametrize("name", list(SECURE_KITS))
def test_every_file_setting_of_a_secured_statefulset_points_into_a_mounted_secret(name: str) -> None:
    kit, container = secured_consumer(name)
    paths = {v for k, v in kit_env(kit, container).items() if k.endswith("_LOCATION")}
    files = mounted_secret_files(kit["StatefulSet"]["spec"]["template"]["spec"], container)
    assert paths <= files, f"not mounted from a Secret: {sorted(paths - files)}"
    if SECURE_KITS[name][0] == "SSL":
        assert {"STATIC_CONSUMER_SSL_CERTIFICATE_LOCATION", "STATIC_CONSUMER_SSL_KEY_LOCATION"} <= set(
            kit["ConfigMap"]["data"]
        ), "mutual TLS mounts the client certificate and key"


def test_the_tls_scale_down_job_reaches_the_cluster_as_the_secured_consumers_do() -> None:
    """The Job's container takes the StatefulSet's ConfigMap, the same Secret variables and the same
    Secret files; its command is one the CLI accepts; RBAC and the init step are the plain Job's."""
    kit, consumer_container = secured_consumer("statefulset-tls.yaml")
    (leave,) = containers(TLS_JOB["Job"])
    job_env, sts_env = kit_env(kit, leave), kit_env(kit, consumer_container)
    secret_vars = {n: v for n, v in sts_env.items() if isinstance(v, dict) and "secretKeyRef" in v}
    assert secret_vars and all(job_env.get(n) == v for n, v in secret_vars.items())
    paths = {v for k, v in job_env.items() if k.endswith("_LOCATION")}
    assert paths and paths <= mounted_secret_files(TLS_JOB["Job"]["spec"]["template"]["spec"], leave)
    argv = [re.sub(r"\$\((\w+)\)", lambda m: str(job_env[m.group(1)]), a) for a in leave["command"]]
    args = build_parser().parse_args(argv[1:])
    name = kit["StatefulSet"]["metadata"]["name"]
    assert (argv[0], args.command, args.statefulset) == ("static-consumer", "scale-down", name)
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        assert TLS_JOB[kind] == JOB[kind], kind
    assert containers(TLS_JOB["Job"], init=True) == containers(JOB["Job"], init=True)


def test_the_oauth_example_provider_fetches_caches_and_fails_with_its_reason() -> None:
    """examples/oauth_tokens.py against a local token endpoint: HTTP basic client authentication, one
    request per token until 80% of its lifetime, and a refused client an AuthenticationError through the
    library that names the HTTP error and never the secret."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sys.path.insert(0, str(EXAMPLES))
    try:
        from oauth_tokens import ClientCredentialsTokens
    finally:
        sys.path.remove(str(EXAMPLES))
    requests: list[tuple[str, str]] = []
    good = "Basic " + base64.b64encode(b"orders-consumer:client-secret-Hv72").decode()

    class TokenEndpoint(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            requests.append((self.headers["Authorization"], body))
            ok = self.headers["Authorization"] == good
            answer = {"access_token": f"tok-{len(requests)}-abcdefgh", "expires_in": 300} if ok else {}
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps(answer).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), TokenEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/token"
    now = [1000.0]
    try:
        tokens = ClientCredentialsTokens(
            url, "orders-consumer", "client-secret-Hv72", scope="kafka", clock=lambda: now[0]
        )
        first = tokens()
        assert (first.value, first.expires_at, first.principal) == (
            "tok-1-abcdefgh",
            1300.0,
            "orders-consumer",
        )
        now[0] += 200
        assert tokens().value == "tok-1-abcdefgh"  # cached: 200 s of 300 is under 80%
        now[0] += 41
        assert tokens().value == "tok-2-abcdefgh"  # past 80%: a new one
        assert [body for _, body in requests] == ["grant_type=client_credentials&scope=kafka"] * 2

        refused = ClientCredentialsTokens(url, "orders-consumer", "wrong-secret-Pz31", timeout_s=5.0)
        settings = ConsumerSettings(
            bootstrap_servers="127.0.0.1:9093",
            group_id="orders",
            security_protocol="SASL_SSL",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=refused,
        )
        with pytest.raises(AuthenticationError) as caught:
            first_token(admin_config(settings), settings)
        assert "raised HTTPError: HTTP Error 401" in str(caught.value)
        assert "wrong-secret-Pz31" not in str(caught.value) + repr(refused) + repr(settings)
    finally:
        server.shutdown()
        server.server_close()


def test_the_security_recipes_use_only_variables_the_library_reads() -> None:
    text = DOCS.read_text()
    names = set(re.findall(r"STATIC_CONSUMER_[A-Z_]+", text))
    assert names and names <= library_env_names(), sorted(names - library_env_names())
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        yaml.safe_load(block)  # every snippet is valid YAML
    for name in [*SECURE_KITS, "scale-down-job-tls.yaml"]:
        assert f"examples/{name}" in text, f"docs/security.md does not point to {name}"


@pytest.mark.parametrize("kit", sorted(p.name for p in EXAMPLES.glob("statefulset*.yaml")))
def test_the_restart_directory_is_on_an_emptydir_every_container_of_the_pod_mounts(kit: str) -> None:
    # A container restarted after a crash finds its dead process's record there (docs/semantics.md): an
    # emptyDir survives a container restart in the pod, and a rescheduled pod starts with an empty one.
    docs = load(kit)
    directory = next(
        str(v) for k, v in docs["ConfigMap"]["data"].items() if k == f"{PREFIX}RESTART_STATE_DIR"
    )
    pod = docs["StatefulSet"]["spec"]["template"]["spec"]
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    (container,) = pod["containers"]
    mounts = [m for m in container["volumeMounts"] if m["name"] in empty and not m.get("readOnly")]
    assert any(directory.startswith(m["mountPath"].rstrip("/") + "/") for m in mounts), (kit, directory)
