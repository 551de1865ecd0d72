"""Code blocks in a rendered reply: highlighted by Pygments (in the theme's light or dark style) and headed by
a Copy link that puts the block's code, exactly as the reply wrote it, on the clipboard.

Works on the HTML Python-Markdown wrote (`<pre><code class="language-x">…</code></pre>`), so the code is the
fenced text, unescaped. The Copy link is an anchor `copy:N` (N counts the reply's code blocks from its start:
a streamed reply rendered in pieces passes the count of blocks before each piece); the message view answers
it, never a browser. A fence naming no language, or one Pygments does not know, is shown unhighlighted:
guessing the language from the code is slow and often wrong.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

COPY_SCHEME = "copy"
NOTE_CLASS = "note"  # quiet text beside a reply's own (a block's language); markdown_render's stylesheet colours it
LIGHT_STYLE, DARK_STYLE = "default", "monokai"

_BLOCK = re.compile(r'<pre><code(?: class="language-([^"]*)")?>(.*?)</code></pre>', re.S)


@lru_cache(maxsize=64)
def _formatter(dark: bool) -> Any:
    # inline styles (QTextDocument has no stylesheet classes for spans), no wrapping <div>/<pre>
    return HtmlFormatter(noclasses=True, nowrap=True, style=DARK_STYLE if dark else LIGHT_STYLE)


@lru_cache(maxsize=128)
def _lexer(language: str) -> Any:
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def highlight_code(code: str, language: str, dark: bool) -> str:
    """`code` as escaped HTML, its tokens coloured when `language` is one Pygments knows."""
    lexer = _lexer(language.lower()) if language else None
    if lexer is None:
        return html.escape(code, quote=False)
    return str(highlight(code, lexer, _formatter(dark)))


def decorate(rendered: str, dark: bool, first_index: int = 0) -> str:
    """Python-Markdown's HTML with each code block highlighted and a Copy link above it."""
    index = first_index

    def block(m: re.Match[str]) -> str:
        nonlocal index
        language = html.unescape(m.group(1) or "")
        code = html.unescape(m.group(2))
        label = html.escape(language) if language else "code"
        head = (f'<p align="right" style="margin-bottom: 0px;"><span class="{NOTE_CLASS}">{label}</span>'
                f' · <a href="{COPY_SCHEME}:{index}">Copy</a></p>')
        index += 1
        return f"{head}<pre><code>{highlight_code(code, language, dark)}</code></pre>"

    return _BLOCK.sub(block, rendered)


def code_texts(rendered: str) -> list[str]:
    """The code of each block in Python-Markdown's HTML, as the reply wrote it (the newline before the closing
    fence is the fence's, not the code's)."""
    return [html.unescape(m.group(2)).removesuffix("\n") for m in _BLOCK.finditer(rendered)]


# Loaded with the window, not at a reply's first code block: Pygments loads a lexer's module, its styles and
# filters on first use, a stall mid-reply (tests/ui/chat/test_no_lazy_imports.py). The languages replies show
# most are warmed; a rarer one costs its module's import once.
COMMON_LANGUAGES = ("python", "bash", "json", "javascript")
for _language in COMMON_LANGUAGES:
    for _dark in (False, True):
        highlight_code("x = 1\n", _language, _dark)
