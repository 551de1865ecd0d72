"""Facts that several layers share are written once (app/core/config/defaults.py, app/core/gguf/): the others
import them, so they cannot drift apart. The scan reads app/'s code (docstrings and comments left out)."""

from __future__ import annotations

import ast
from pathlib import Path

from app.core.config.defaults import CONTEXT_OVERFLOW_POLICIES, DEFAULT_N_CTX, DEFAULT_SERVE_PORT

APP = Path(__file__).resolve().parents[1] / "app"
HOMES = {"core/config/defaults.py", "core/gguf/kv_types.py", "core/gguf/quant_types.py"}


def _lists_outside_homes(members: set[str], least: int = 2) -> list[str]:
    """Tuples, lists, sets, dicts and subscripts (Literal[...]) outside the homes that hold `least` or more of
    `members`: a copy of the list (one value compared, `policy == "rolling"`, is a use, not a copy)."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        rel = path.relative_to(APP).as_posix()
        if rel in HOMES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else \
                list(node.keys) if isinstance(node, ast.Dict) else []
            values = {e.value for e in elts if isinstance(e, ast.Constant)}
            if len(values & members) >= least:
                found.append(f"{rel}:{node.lineno}")
    return found


def _defaults_outside_homes(names: tuple[str, ...], value: int) -> list[str]:
    """`name = value`, `name: int = value`, `name=value` (a call's keyword) and `def f(name=value)` outside
    the homes, for names ending in one of `names`: a default written again."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        rel = path.relative_to(APP).as_posix()
        if rel in HOMES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            pairs: list[tuple[str, ast.AST | None]] = []
            if isinstance(node, ast.Assign):
                pairs = [(t.id if isinstance(t, ast.Name) else getattr(t, "attr", ""), node.value)
                         for t in node.targets]
            elif isinstance(node, ast.AnnAssign):
                target = node.target
                pairs = [(target.id if isinstance(target, ast.Name) else getattr(target, "attr", ""), node.value)]
            elif isinstance(node, ast.keyword) and node.arg:
                pairs = [(node.arg, node.value)]
            elif isinstance(node, ast.arguments):
                positional = node.posonlyargs + node.args
                pairs = [(a.arg, d) for a, d in zip(positional[len(positional) - len(node.defaults):],
                                                    node.defaults, strict=True)]
                pairs += [(a.arg, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)]
            for name, default in pairs:
                if name.lower().endswith(names) and isinstance(default, ast.Constant) and default.value == value:
                    found.append(f"{rel}:{default.lineno} {name}")
    return found


def test_overflow_policies_default_context_and_port_have_one_home() -> None:
    assert _lists_outside_homes(set(CONTEXT_OVERFLOW_POLICIES)) == []
    assert _defaults_outside_homes(("ctx", "port"), DEFAULT_N_CTX) == []
    assert _defaults_outside_homes(("ctx", "port"), DEFAULT_SERVE_PORT) == []


def test_the_layers_use_the_shared_values() -> None:
    from app.core.config.settings import ModelPreset, Settings
    from app.core.models.fit import LIBRARY_CTX
    from app.core.predict.memory import MemoryConfig
    from app.engine.protocol import LoadConfig

    assert Settings.model_fields["n_ctx"].default == LoadConfig("m").n_ctx == MemoryConfig().n_ctx == LIBRARY_CTX
    assert set(CONTEXT_OVERFLOW_POLICIES) == {"stop", "truncate-middle", "rolling"}
    annotation = str(ModelPreset.model_fields["context_overflow"].annotation)
    assert all(p in annotation for p in CONTEXT_OVERFLOW_POLICIES)


def test_kv_and_quant_type_lists_have_one_home() -> None:
    from app.core.gguf.kv_types import KV_TYPES
    from app.core.gguf.quant_types import QUANTIZE_TARGETS

    # the engine's own table maps each offered KV type to llama.cpp's enum: keyed by the names, not a copy
    assert [f.rsplit(":", 1)[0] for f in _lists_outside_homes(set(KV_TYPES))] == ["engine/llama/worker/load.py"]
    # other facts about some of the same types (repacked types, per-type rates, the zoo's mixes) hold a few
    assert _lists_outside_homes(set(QUANTIZE_TARGETS), least=len(QUANTIZE_TARGETS) * 2 // 3) == []
