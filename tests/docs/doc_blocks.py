"""The Python examples of README.md and docs/*.md, and how to run one as a user would.

Every ```python block is a complete program. An HTML comment on the line before the fence says what
it needs, e.g. ``<!-- example: broker until-sigterm -->``:

- no comment: it runs as it is, without a broker (``tests/docs/test_doc_examples.py``);
- ``broker``: it talks to a broker; ``integration/test_doc_examples_on_broker.py`` runs it against the
  real one and expects exit 0;
- ``until-sigterm``: it runs until SIGTERM; the runner sends it once the group has a member, and
  expects exit 0;
- ``spark``: it starts Spark (run with the broker tests);
- ``pytest``: it is a test module for the lab's pytest plugin;
- ``container``: it needs a container engine (the lab's container backend), as ``pytest -k container``.

A block is run in a directory of its own, the blocks of one page in order, with the settings a pod
would have in its environment (``STATIC_CONSUMER_*``, ``POD_NAME``), ``examples/`` on the path, and two
substitutions: ``localhost:9092`` becomes the broker's address, and absolute data paths (``/data/``,
``/var/run/consumer/``) become paths in that directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FLAGS = frozenset({"broker", "until-sigterm", "spark", "pytest", "container"})
_BLOCK = re.compile(r"(?:^<!-- example: ([^>]*?) -->\n)?^```python\n(.*?)^```$", re.M | re.S)
_PATHS = {'"/data/': '"data/', '"/var/run/consumer/': '"run/'}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    code: str
    flags: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def program(self, bootstrap: str) -> str:
        code = self.code.replace("localhost:9092", bootstrap)
        for old, new in _PATHS.items():
            code = code.replace(old, new)
        return code


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            flags = frozenset((m.group(1) or "").split())
            line = text.count("\n", 0, m.start(2))
            found.append(Block(page, line, m.group(2), flags))
    return found


def environment(bootstrap: str, group: str, topic: str) -> dict[str, str]:
    """What a pod's environment holds, for blocks that read their settings from it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STATIC_CONSUMER_", "OAUTH_"))}
    env.update(
        STATIC_CONSUMER_BOOTSTRAP_SERVERS=bootstrap,
        STATIC_CONSUMER_GROUP_ID=group,
        STATIC_CONSUMER_TOPICS=topic,
        STATIC_CONSUMER_CONNECT_TIMEOUT_S="30",
        POD_NAME="orders-0",
        OAUTH_TOKEN_URL="https://login.example.com/token",
        OAUTH_CLIENT_ID="orders-consumer",
        OAUTH_CLIENT_SECRET="not-a-secret",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "examples"), env.get("PYTHONPATH")) if p),
    )
    return env


def start(
    block: Block, cwd: Path, bootstrap: str, env: dict[str, str], python: str = sys.executable
) -> subprocess.Popen[str]:
    """Start ``block`` with ``python`` (this interpreter unless told), its output merged."""
    script = cwd / f"example_{block.line}.py"
    script.write_text(block.program(bootstrap), encoding="utf-8")
    return subprocess.Popen(
        [python, script.name],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run(
    block: Block,
    cwd: Path,
    bootstrap: str,
    env: dict[str, str],
    timeout_s: float,
    python: str = sys.executable,
) -> tuple[int, str]:
    """Run ``block`` to its end; its exit code and output."""
    process = start(block, cwd, bootstrap, env, python)
    try:
        out, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        return -9, out + f"\n[killed after {timeout_s} s]"
    return process.returncode, out
