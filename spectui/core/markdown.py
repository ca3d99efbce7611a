"""Text from outside made safe for a Markdown cell: the one escape the reports, the terms table and the
certificate share (core.report, core.terms_table, run.prove.render)."""

from __future__ import annotations

from spectui.core.errors import redact

_MD_SPECIAL = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "|": "\\|",
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "\n": " ",
        "\r": " ",
    }
)


def md_cell(value) -> str:
    """A value from outside (a server's build, model or URL, a prompt id, an error message) as text in a
    Markdown table: no HTML, no cell break, no emphasis or link it did not mean; credentials redacted."""
    return redact(str(value)).translate(_MD_SPECIAL)
