"""``static-consumer run`` without a broker: the command line, the handler's import, and every mistake
found before a worker is forked (exit 78 at once, with the reason on stderr); the script hands the
other commands to the operator CLI."""

from __future__ import annotations

import io
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from static_consumer import command
from static_consumer._base.errors import ConfigurationError
from static_consumer.admin import cli

ENV = {
    "STATIC_CONSUMER_BOOTSTRAP_SERVERS": "127.0.0.1:9",
    "STATIC_CONSUMER_GROUP_ID": "orders",
    "STATIC_CONSUMER_TOPICS": "orders",
    "POD_NAME": "orders-2",
}


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pool_app.py").write_text("def handle(batch):\n    pass\n\nNOT_CALLABLE = 3\n")
    for key in [k for k in os.environ if k.startswith("STATIC_CONSUMER_")]:
        monkeypatch.delenv(key)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "path", list(sys.path))  # --app-dir prepends to it
    return tmp_path


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = command.run(list(argv), stderr=err)
    return code, err.getvalue()


def test_the_handler_is_imported_from_the_app_dir(app: Path) -> None:
    handler = command.load_callable("pool_app:handle", str(app))
    assert handler.__name__ == "handle"
    with pytest.raises(ConfigurationError, match="has no 'missing'"):
        command.load_callable("pool_app:missing")
    with pytest.raises(ConfigurationError, match="is not callable"):
        command.load_callable("pool_app:NOT_CALLABLE")
    with pytest.raises(ConfigurationError, match="is not MODULE:NAME"):
        command.load_callable("pool_app")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["no_such_module:handle"], {}, "cannot import 'no_such_module'"),
        (["pool_app:handle"], {"POD_NAME": "orders-7d9f8c6b5-x2x4q"}, "InvalidInstanceIdError: pod name"),
        (["pool_app:handle"], {"STATIC_CONSUMER_SESSION_TIMEOUT_MS": "-1"}, "session_timeout_ms"),
        (["pool_app:handle", "--processes", "0"], {}, "processes must be an integer from 1 to 1024"),
        (
            ["pool_app:handle", "--processes", "2"],
            {"STATIC_CONSUMER_ASSIGNMENT_MODE": "ordinal", "STATIC_CONSUMER_REPLICAS": "3"},
            "one process per pod",
        ),
    ],
)
def test_mistakes_fail_the_pod_at_once_with_78_before_any_fork(
    app: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], message: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, err = run(*argv, "--app-dir", str(app))
    assert code == 78 and message in err, err
    assert err.startswith("static-consumer run: ")
    assert multiprocessing.active_children() == []


def test_a_bad_command_line_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("pool_app:handle", "--processes", "two")[0] == 2
    assert run("--help")[0] == 0
    assert "--processes" in capsys.readouterr().out


def test_the_script_hands_every_other_command_to_the_operator_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert "run" in listed and "scale-down" in listed  # `run` is listed with the operator commands
    err = io.StringIO()
    assert cli.main(["run", "pool_app:handle"], stderr=err) == 2  # the operator CLI cannot run pools
    assert "static_consumer.command" in err.getvalue()


def test_the_installed_script_is_the_command_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "static_consumer.command", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and "MODULE:HANDLER" in done.stdout
    scripts = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'static-consumer = "static_consumer.command:main"' in scripts
