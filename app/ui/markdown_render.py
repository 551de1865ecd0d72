"""Markdown to the HTML subset QTextDocument understands: fenced code blocks, tables, escaped raw HTML.

User text is escaped (what the user typed is shown, never interpreted); model text is Markdown with any
raw HTML escaped too, so a reply cannot inject markup into the view.
"""

from __future__ import annotations

import html

import markdown
from markdown.extensions import Extension

from app.ui.theme import Colors


class _EscapeHtml(Extension):
    """Drop the raw-HTML preprocessors and inline patterns so `<b>` in text stays literal text."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # markdown's API name
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


_md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists", _EscapeHtml()])


def markdown_to_html(text: str) -> str:
    _md.reset()
    return _md.convert(text)


def plain_to_html(text: str) -> str:
    """User messages: escaped, line breaks kept."""
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"


def stylesheet(c: Colors) -> str:
    # QTextDocument CSS: pre-wrap keeps long code lines inside the view instead of widening it.
    return (
        f"body {{ color: {c.text}; }}"
        f"pre {{ background-color: {c.code_bg}; white-space: pre-wrap; font-family: monospace; }}"
        f"code {{ background-color: {c.code_bg}; font-family: monospace; }}"
        f"table {{ border-collapse: collapse; }} th, td {{ border: 1px solid {c.border}; padding: 3px; }}"
        "p { margin-top: 0px; margin-bottom: 6px; }"
    )
