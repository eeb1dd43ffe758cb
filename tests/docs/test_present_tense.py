"""The user-facing docs, and the comments and docstrings of the code, speak about the product in the
present tense: no account of how they were made.

A reader needs what the library does and what was measured (command, date, versions, hardware, spread),
not which machine was busy, which lock a run held, which issue or commit a change came from, or which
internal target a number missed. Each pattern below is such narration; Kafka's own words ("session
timeout", "a 45 s session", "the group's session") are not caught. In code only the comments and
docstrings are read: a test may well name a temporary directory in its statements.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "lab" / "README.md"]
    + list((ROOT / "docs").glob("*.md"))
    + [p for p in (ROOT / "examples").iterdir() if p.is_file()]
)

# A UUID or a Kubernetes pod name (`orders-7d9f8c6b5-x2x4q`) holds hex-looking parts that are not commits.
_ATTACHED_HEX = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\w+-[0-9a-f]+-\w+", re.I
)

NARRATION: dict[str, re.Pattern[str]] = {
    "a commit hash": re.compile(
        r"(?<![\w./-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])"
        r"|\b(landed at|commit) [0-9a-f]{7,40}\b"
    ),
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a branch": re.compile(r"\b(this|the|that|a|on|at) branch\b|\bbranch's\b", re.I),
    "a shared machine": re.compile(
        r"\bshared (2-core |test )?machine\b|\bmachine (was )?shared\b|\bshared with other\b", re.I
    ),
    "other jobs or agents on the machine": re.compile(
        r"\bother (jobs?|agents?|sessions?)\b|\banother (job|agent|session)\b"
        r"|\bsessions' (tests|jobs|work)\b",
        re.I,
    ),
    "a work session": re.compile(r"\b(this|an earlier|earlier|previous) session\b|\bin one session\b", re.I),
    "a machine lock": re.compile(
        r"heavy-exclusive|heavy\.lock|\bflock /|\bmachine lock\b|\block holds?\b|\btook the machine\b|"
        r"\bheld the machine\b|\bunder the machine\b",
        re.I,
    ),
    "a temporary path": re.compile(r"(?<![\w.])/tmp/"),
    "a superseded run": re.compile(
        r"\bearlier runs?\b|\bbefore (a|the) fix\b|\bafter (a|the) fix\b|\bthe current numbers\b|"
        r"\bre-measured\b|\bre-run\b|\bdevelopment history\b|\bolder code\b|\bbefore the move\b|"
        r"\bpredates?\b|\buntil commit\b",
        re.I,
    ),
    "an internal target": re.compile(r"\bgoals?\b|\bnot met\b|\*\*met\b", re.I),
    "a change log inside a reference": re.compile(r"\bWas: "),
}


def _lines(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").splitlines(), start=1))


def narration_in(text: str) -> list[str]:
    """The kinds of narration ``text`` holds (one line of a doc)."""
    found = []
    for kind, pattern in NARRATION.items():
        probe = _ATTACHED_HEX.sub(" ", text) if kind == "a commit hash" else text
        if pattern.search(probe):
            found.append(kind)
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_doc_speaks_in_the_present_tense(path: Path) -> None:
    hits = [
        f"{path.name}:{n}: {kind}: {line.strip()[:120]}"
        for n, line in _lines(path)
        for kind in narration_in(line)
    ]
    assert hits == [], "narration in a user doc:\n" + "\n".join(hits)


# The code whose comments and docstrings are read: every source of the library, the lab, the tests and the
# benchmarks, and the build and CI scripts. This file's own examples of narration are strings, not comments.
CODE_FOLDERS = ("static_consumer", "lab", "tests", "integration", "bench", ".ci")
CODE_SUFFIXES = {".py", ".pyi", ".c", ".sh", ""}


def _code_files() -> list[Path]:
    files = [ROOT / "Makefile"]
    for folder in CODE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            skip = {"__pycache__", "build", "node_modules"} & set(path.parts) or path.name.startswith(".")
            if path.is_file() and path.suffix in CODE_SUFFIXES and not skip and _is_text_source(path):
                files.append(path)
    return files


def _is_text_source(path: Path) -> bool:
    if path.suffix:
        return True
    try:  # a script without a suffix: a shell script (its shebang says so)
        return path.read_bytes()[:2] == b"#!"
    except OSError:
        return False


def _python_prose(text: str) -> list[tuple[int, str]]:
    """The comments and docstrings of Python source, line by line."""
    lines: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            lines.append((token.start[0], token.string))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                start = first.lineno
                lines += [(start + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return lines


_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_HASH_COMMENT = re.compile(r"(?:^|\s)(#.*)$")


def prose_of(path: Path) -> list[tuple[int, str]]:
    """The comments and docstrings of a source file, with their line numbers."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".py", ".pyi"):
        return _python_prose(text)
    if path.suffix == ".c":
        return [
            (text.count("\n", 0, m.start()) + 1 + i, line)
            for m in _C_COMMENT.finditer(text)
            for i, line in enumerate(m.group(0).splitlines())
        ]
    found = []  # shell scripts and the Makefile: what follows a '#'
    for n, line in enumerate(text.splitlines(), start=1):
        match = _HASH_COMMENT.search(line)
        if match is not None and not line.startswith("#!"):
            found.append((n, match.group(1)))
    return found


@pytest.mark.parametrize("path", _code_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_code_comments_speak_in_the_present_tense(path: Path) -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {kind}: {line.strip()[:120]}"
        for n, line in prose_of(path)
        for kind in narration_in(line)
    ]
    assert hits == [], "narration in a comment or docstring:\n" + "\n".join(hits)


def test_comments_and_docstrings_are_what_is_read_in_code(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        '"""Module docstring (issue 22)."""\n'
        "path = '/tmp/x'  # a comment on a shared machine\n"
        "def f():\n"
        '    """Before the fix it hung."""\n'
        "    return 'goal'\n"
    )
    kinds = [kind for _, line in prose_of(source) for kind in narration_in(line)]
    assert sorted(kinds) == ["a shared machine", "a superseded run", "an issue number"]


@pytest.mark.parametrize(
    "line",
    [
        "One run at this branch's code (commit 6bbad2c), the machine shared with other sessions' queued jobs",
        "every run through `heavy-exclusive` (alone on the machine)",
        "the library as landed at 1497381",
        "re-measured for issue 28 (same command)",
        "`flock /tmp/heavy.lock python bench/bench_pool.py throughput`",
        "the goal of 1.8 was **not met** on this shared machine",
        "an earlier run of the demo's own static loop did, before a fix",
        "Was: exit 75 after `connect_timeout_s`",
    ],
)
def test_narration_is_caught(line: str) -> None:
    assert narration_in(line) != []


@pytest.mark.parametrize(
    "line",
    [
        "a restart within the session timeout gets its partitions back (45 s session, 3 s heartbeat)",
        "the group's session expired; the broker's `group.consumer.session.timeout.ms`",
        "orders-0     orders-0-cb3c1b02-a2ee-44f7-8500-1af42f94acc4  10.0.3.17  orders-consumer",
        "`orders-7d9f8c6b5-x2x4q`, `web-7d4b9c8f6d-24567` | a Deployment pod: refused",
        "a file lock keeps two builds of the image apart; `spark_session()` starts a local session",
        "records of partitions this member no longer owns are dropped; 1,795,651,192 records",
        "`StaticConsumer` in the branches of `Mode`: no protocol branches",
    ],
)
def test_product_text_passes(line: str) -> None:
    assert narration_in(line) == []
