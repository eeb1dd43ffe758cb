"""docs/security.md's ACL table is the library's own (``static_consumer._kafka.acls.NEEDS``, which
integration/test_acls.py grants and takes away on a broker with KRaft's StandardAuthorizer)."""

from __future__ import annotations

from pathlib import Path

from static_consumer._kafka.acls import NEEDS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()


def rows() -> list[str]:
    out = []
    for operation, needs in NEEDS.items():
        for need in needs:
            acl = need.acl
            required = "optional" if need.optional else f"required{f' for {need.when}' if need.when else ''}"
            out.append(
                f"| {operation} | `{acl.operation}` on {acl.resource} `{acl.name}` ({required}) | "
                f"{need.why} | {need.without} |"
            )
    return out


def test_docs_security_lists_every_acl_the_library_needs() -> None:
    missing = [row for row in rows() if row not in DOC]
    assert missing == [], "docs/security.md lacks (or words differently):\n" + "\n".join(missing)
