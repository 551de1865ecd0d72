"""Markdown to the HTML subset QTextDocument understands: fenced code blocks, tables, escaped raw HTML.

User text is escaped (what the user typed is shown, never interpreted); model text is Markdown with any
raw HTML escaped too, so a reply cannot inject markup into the view. Nothing in a reply makes the view load
anything: an image becomes its alt text and a note (`![x](/dev/zero)` once aborted the window), and a link
stays a link only when it points at an http(s) address, with that address's host shown beside text that
says something else; any other link (file:, javascript:, …) is shown as text with its real target.

Code blocks are highlighted and get a Copy link (app/ui/chat/code_blocks.py). A code fence that is never
closed runs to the end of the text, as CommonMark has it: a reply stopped, cut
short or broken by an error inside a code block keeps its code block (Python-Markdown alone would make the
fence and the code one paragraph of plain text).
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as etree  # noqa: N813 - Python-Markdown's own name for it
from urllib.parse import urlsplit

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

from app.ui.chat.code_blocks import NOTE_CLASS, code_texts, decorate
from app.ui.toolkit.theme import Colors


class _EscapeHtml(Extension):
    """Drop the raw-HTML preprocessors and inline patterns so `<b>` in text stays literal text."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # markdown's API name
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


WEB_SCHEMES = ("http", "https")


def is_web_link(href: str) -> bool:
    try:
        parts = urlsplit(href.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in WEB_SCHEMES and bool(parts.netloc)


def _note(text: str) -> etree.Element:
    span = etree.Element("span", {"class": NOTE_CLASS})  # coloured by the theme's stylesheet
    span.text = text
    return span


class _SafeResources(Treeprocessor):
    """Images become text; links keep only web targets, and never hide where they go."""

    def run(self, root: etree.Element) -> None:
        for el in list(root.iter()):
            if el.tag == "img":
                alt, src = el.get("alt", ""), el.get("src", "")
                el.attrib.clear()
                el.tag = "span"
                el.text = f"[image{': ' + alt if alt else ''}]"
                el.append(_note(f" (not loaded: {src})" if src else " (not loaded)"))
            elif el.tag == "a":
                self._link(el)

    @staticmethod
    def _link(el: etree.Element) -> None:
        href = el.get("href", "")
        shown = "".join(el.itertext()).strip()
        if not is_web_link(href):
            el.attrib.clear()
            el.tag = "span"
            el.append(_note(f" ({href}: not a web link, not opened)" if href else " (empty link)"))
            return
        el.attrib.clear()
        el.set("href", href.strip())
        if shown.rstrip("/") not in (href.strip().rstrip("/"), href.split("://", 1)[-1].rstrip("/")):
            el.tail = f" ({urlsplit(href.strip()).hostname or href})" + (el.tail or "")


class _SafeResourcesExtension(Extension):
    def extendMarkdown(self, md: markdown.Markdown) -> None:  # markdown's API name
        # after inline parsing and unescaping
        md.treeprocessors.register(_SafeResources(md), "roofline_safe_resources", -1)


_md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists", _EscapeHtml(),
                                    _SafeResourcesExtension()])


# A fence line as Python-Markdown's fenced_code reads one: at the start of the line, three or more of one
# character, then the info string.
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)")


def close_open_fence(text: str) -> str:
    """`text` with its last code fence closed when it never was (CommonMark: it runs to the end)."""
    fence = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m is None:
            continue
        if fence is None:
            if not (m.group(1)[0] == "`" and "`" in m.group(2)):  # an info string never holds a backtick
                fence = m.group(1)
        elif m.group(1) == fence and not m.group(2).strip():  # Python-Markdown closes on the same fence only
            fence = None
    if fence is None:
        return text
    return text + ("" if text.endswith("\n") else "\n") + fence + "\n"


def _convert(text: str) -> str:
    _md.reset()
    return _md.convert(close_open_fence(text))


def markdown_to_html(text: str, first_code_block: int = 0, dark: bool | None = None) -> str:
    """The reply as HTML, its code blocks highlighted with a Copy link (app/ui/chat/code_blocks.py), counted
    from `first_code_block`; `dark`: the theme's (default: the one in use)."""
    if dark is None:
        from app.ui.toolkit.theme import is_dark

        dark = is_dark()
    return decorate(_convert(text), dark, first_code_block)


def code_blocks(text: str) -> list[str]:
    """The code of each fenced block of a reply, as written (what its Copy links copy)."""
    return code_texts(_convert(text))


def plain_to_html(text: str) -> str:
    """User messages: escaped, line breaks kept."""
    return "<p>" + html.escape(text).replace("\n", "<br>") + "</p>"


def stylesheet(c: Colors) -> str:
    # QTextDocument CSS: pre-wrap keeps long code lines inside the view instead of widening it.
    return (
        f"body {{ color: {c.text}; }}"
        f".{NOTE_CLASS} {{ color: {c.muted}; }}"
        f"pre {{ background-color: {c.code_bg}; white-space: pre-wrap; font-family: monospace; }}"
        f"code {{ background-color: {c.code_bg}; font-family: monospace; }}"
        f"table {{ border-collapse: collapse; }} th, td {{ border: 1px solid {c.border}; padding: 3px; }}"
        "p { margin-top: 0px; margin-bottom: 6px; }"
    )
