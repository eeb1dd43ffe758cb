"""Every Python example in README.md and docs/ compiles, and those that need no broker run as written.

The convention is in ``doc_blocks``; the broker's blocks run in
integration/test_doc_examples_on_broker.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_blocks import FLAGS, Block, blocks, environment, run

BLOCKS = blocks()
# What a page's own ConfigMap sets for its examples (security.md: an OAUTHBEARER cluster).
PAGE_ENV = {
    "security.md": {
        "STATIC_CONSUMER_SECURITY_PROTOCOL": "SASL_SSL",
        "STATIC_CONSUMER_SASL_MECHANISM": "OAUTHBEARER",
    }
}


def test_the_pages_have_examples() -> None:
    assert len(BLOCKS) >= 15
    assert any(b.page.name == "README.md" and "broker" in b.flags for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_every_example_compiles_and_is_marked_with_known_flags(block: Block) -> None:
    assert block.flags <= FLAGS, f"unknown flags {sorted(block.flags - FLAGS)}: use {sorted(FLAGS)}"
    compile(block.code, block.name, "exec")


def _pages_without_a_broker() -> list[Path]:
    return sorted({b.page for b in BLOCKS if b.flags <= {"pytest", "container"}})


@pytest.mark.parametrize("page", _pages_without_a_broker(), ids=lambda p: p.name)
def test_the_examples_that_need_no_broker_run_as_written(page: Path, tmp_path: Path) -> None:
    """In page order, in one directory: a later block may read what an earlier one wrote. Nothing listens
    at the address they are given, so a block that tried to reach a broker would fail here."""
    env = environment("localhost:9092", "orders", "orders") | PAGE_ENV.get(page.name, {})
    for block in [b for b in BLOCKS if b.page == page and b.flags <= {"pytest", "container"}]:
        code, out = run(block, tmp_path, "localhost:9092", env, timeout_s=120)
        assert code == 0, f"{block.name} exited {code}:\n{out[-3000:]}"
