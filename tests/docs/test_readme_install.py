"""The README's first steps as a user takes them: the install of the library alone, then its pod main
against an address where no broker listens, which ends in a few lines that name the address and the
error, a readable reason and the documented exit code (75: a temporary failure, restart it).

``test_the_library_alone_installs_in_a_clean_venv`` is slow (``slow_install``): it creates a venv with
Python 3.11's own ``venv`` and pip (no packages of this environment), installs ``./`` from a copy of the
sources with ``pip install ./`` as the README says, so pip fetches the dependencies from the package
index (from pip's cache where it holds them) and builds the native ``Record``, and runs what a user runs
first with that venv's interpreter. It took 28-33 s in 3 runs, 21-26 s of them for the venv and the
install (2026-11-28, 2 cores under a load average of 10-17, pip 23.2.1).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from doc_blocks import ROOT, Block, blocks, environment, run

CONNECT_TIMEOUT_S = "3"
# A line of the pod main's log format ("%(asctime)s %(levelname)s %(name)s: %(message)s") at INFO or more.
_SHOWN = re.compile(r"^\S+ \S+ (?:INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)$", re.M)


def pod_main() -> Block:
    return next(b for b in blocks() if b.page.name == "README.md" and "run_until_sigterm" in b.code)


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed): a connection is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable_env(address: str) -> dict[str, str]:
    env = environment(address, "orders", "orders")
    env["STATIC_CONSUMER_CONNECT_TIMEOUT_S"] = CONNECT_TIMEOUT_S
    return env


def check_the_pod_main_says_why(code: int, out: str, address: str) -> None:
    """Exit 75 after a few lines: the refused connection named once (then at most a summary per interval),
    and the reason it stopped."""
    assert code == 75, out[-3000:]
    shown = _SHOWN.findall(out)
    first = [m for n, m in shown if n == "static_consumer.connections" and m.startswith("cannot connect")]
    assert first == [
        f"cannot connect to {address} (Connection refused); retrying, each attempt logged at DEBUG by "
        "static_consumer.admin.librdkafka"
    ], out[-3000:]
    stopped = f"stopped: could not read broker capabilities from {address} within {CONNECT_TIMEOUT_S}s ("
    assert shown[-1][0] == "orders" and shown[-1][1].startswith(stopped), out[-3000:]
    others = [m for _, m in shown[:-1] if m not in first and not m.startswith("still cannot connect to")]
    assert others == [], out[-3000:]


def test_the_pod_main_against_an_unreachable_broker_says_why_in_a_few_lines(tmp_path: Path) -> None:
    address = f"127.0.0.1:{closed_port()}"
    code, out = run(pod_main(), tmp_path, address, unreachable_env(address), timeout_s=120)
    check_the_pod_main_says_why(code, out, address)


# What `pip install ./` reads from a checkout (pyproject.toml's packages, setup.py's extension).
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "static_consumer", "assignors")
_NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.so", "build", "*.egg-info", ".*")


@pytest.mark.slow_install
def test_the_library_alone_installs_in_a_clean_venv(tmp_path: Path) -> None:
    python311 = shutil.which("python3.11")
    assert python311 is not None, "the README installs with python3.11: it is not on PATH"
    src = tmp_path / "checkout"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=_NOT_SOURCES)
        else:
            src.mkdir(exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    venv = tmp_path / "venv"
    bin_ = venv / "bin"
    env = {k: v for k, v in unreachable_env("unused").items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    began = time.monotonic()
    subprocess.run([python311, "-m", "venv", venv], check=True, timeout=300, capture_output=True)
    pip = subprocess.run(
        [bin_ / "pip", "install", "./"], cwd=src, env=env, timeout=900, capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    installed = time.monotonic() - began
    # The venv's own interpreter, outside the checkout: it finds the installed package, not the sources.
    work = tmp_path / "app"
    work.mkdir()

    def venv_run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=work, env=env, timeout=120, capture_output=True, text=True)

    where = venv_run(bin_ / "python", "-c", "import static_consumer; print(static_consumer.__file__)")
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    help_ = venv_run(bin_ / "static-consumer", "--help")
    assert help_.returncode == 0 and "usage: static-consumer" in help_.stdout, help_.stdout + help_.stderr
    commands = set(re.findall(r"^    ([a-z-]+)\s", help_.stdout, re.M))
    assert commands >= {"run", "probe", "describe", "remove-members", "scale-down"}, help_.stdout

    address = f"127.0.0.1:{closed_port()}"
    code, out = run(pod_main(), work, address, env, timeout_s=120, python=str(bin_ / "python"))
    check_the_pod_main_says_why(code, out, address)
    print(f"venv and pip install ./: {installed:.1f}s")
