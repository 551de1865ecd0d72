"""The docs name code that exists: every `app/….py` path, every `app.x.y` module, and every `module.name`
reference in backticks (`hub/files.safe_relpath`, `engine_queue.Hub`) resolves to a module of app/ that defines
the name. A module moved or renamed without its docs fails here with the doc, the line and the stale name.
The dated records under docs/bench/ are left out: they say what the code was called on their date."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
TOP = ("core", "engine", "ui", "server", "commands", "charts")

# Module names the move to domain folders retired; a reference that names one is out of date whatever follows it.
RETIRED = {
    "batch_lab", "benchfmt", "chat_export", "chat_export_ui", "chat_session", "chat_store", "chat_templates",
    "chat_trash", "chat_versions", "curated_models", "dashboard_context", "dashboard_live", "dashboard_reasoning",
    "dashboard_speculative", "download_files", "download_guard", "download_queue", "draft_control", "draft_picker",
    "drafts", "engine_remote", "gguf_errors", "gguf_facts", "gguf_info", "gguf_split", "gguf_values",
    "gguf_writing", "lab_page", "library_fit", "model_manager", "model_preset", "model_selector", "model_tips",
    "quant_quality", "remote_gguf", "remote_http", "roofline_model", "sampling_defaults", "serve_control",
    "serve_switch", "settings_checks", "settings_dialog", "settings_memory", "speed_rates",
}
# Names in backticks that read like one of our modules but are not: the gguf library's reader, a settings key.
NOT_OURS = {"gguf.GGUFReader", "window.theme"}
FILE_TYPES = {"py", "json", "md", "txt", "gguf", "sqlite3", "png", "svg", "ico", "icns", "toml", "cfg", "yaml", "sh",
              "so", "dll", "dylib", "spec", "desktop", "xml", "gz", "zip", "bak", "log", "csv", "html", "c", "exe"}
PATH = re.compile(r"(?<![\w/.-])((?:app|tests|scripts)/[\w/.-]*?\.py)\b")
DOTTED = re.compile(r"(?<![\w.`/])(app(?:\.\w+)+)")
TICKED = re.compile(r"`([A-Za-z_][\w/]*(?:\.[A-Za-z_]\w*)*)(?:\(\))?`")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _lines() -> list[tuple[str, str]]:
    return [(f"{doc.relative_to(ROOT)}:{n}", line) for doc in _docs()
            for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)]


@cache
def _modules() -> dict[str, list[Path]]:
    """Each module of app/ under every path suffix it can be named by ('files', 'hub/files', 'core/hub/files')."""
    found: dict[str, list[Path]] = {}
    for path in APP.rglob("*.py"):
        parts = path.relative_to(APP).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for i in range(len(parts)):
            found.setdefault("/".join(parts[i:]), []).append(path)
    return found


def _defines(path: Path, name: str) -> bool:
    if path.name == "__init__.py" and (any(path.parent.glob(f"{name}.*")) or (path.parent / name).is_dir()):
        return True
    source = path.read_text(encoding="utf-8")
    return re.search(rf"^\s*(?:async def|def|class)\s+{name}\b|^\s*{name}\s*[:=]|^\s*(?:from|import)\b.*\b{name}\b",
                     source, re.M) is not None


def _stale(reference: str) -> str | None:
    """Why a `module.name` or `folder/module` reference is stale, or None when it resolves (or is not code)."""
    if reference in NOT_OURS or reference.startswith("app."):  # dotted app modules: the test above
        return None
    if reference.endswith("/"):  # a folder: ours when it starts at app/
        return "no such folder" if reference.startswith("app/") and not (ROOT / reference).is_dir() else None
    module, _, rest = reference.partition(".")
    if rest.rsplit(".", 1)[-1] in FILE_TYPES:  # a file's name: the paths test checks app/ ones
        return None
    if module.split("/")[-1] in RETIRED:
        return "a retired module name"
    paths = _modules().get(module.removeprefix("app/"))
    if paths is None:
        return "no such module in app/" if "/" in module and module.split("/")[0] in (*TOP, "app") else None
    name = rest.split(".")[0]
    if name and not any(_defines(p, name) for p in paths):
        return f"{name} is not in {', '.join(str(p.relative_to(ROOT)) for p in paths)}"
    return None


def test_every_path_a_doc_names_exists() -> None:
    missing = [f"{where}: {m}" for where, line in _lines() for m in PATH.findall(line) if not (ROOT / m).exists()]
    assert missing == []


def test_every_app_module_a_doc_names_exists() -> None:
    stale = []
    for where, line in _lines():
        for dotted in DOTTED.findall(line):
            parts = dotted.split(".")[1:]
            reference = "/".join(parts)
            while parts and "/".join(parts) not in _modules():  # the module, then what it defines
                parts.pop()
            if not parts or _stale("/".join(parts) + "." + ".".join(dotted.split(".")[1 + len(parts):])):
                stale.append(f"{where}: {dotted} ({reference})")
    assert stale == []


def test_every_module_reference_in_backticks_resolves() -> None:
    stale = [f"{where}: `{ref}`: {why}" for where, line in _lines() for ref in TICKED.findall(line)
             if (why := _stale(ref))]
    assert stale == []


def test_a_stale_reference_is_caught() -> None:
    """The checks above can fail: the names the move retired, and a moved function, are reported."""
    assert _stale("server/hub.Hub") == "no such module in app/"
    assert _stale("roofline_model.build") == "a retired module name"
    assert _stale("speed_rates.BATCH_PER_GEMM") == "a retired module name"
    assert _stale("ContextOverflow") is None  # the engine's class (only the settings' Literal was renamed)
    assert _stale("hub.list_variants") is not None  # app/core/hub/ is a package now: the function is in listing
    assert _stale("hub/listing.list_variants") is None and _stale("engine_queue.Hub._restart") is None
    assert _stale("lfs.sha256") is None  # not code: a JSON field
