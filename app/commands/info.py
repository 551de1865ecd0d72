"""`roofline info [-m MODEL] [--json]`: what a GGUF file holds, read from its header (no loading)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.commands._common import add_model_arg, inspect_or_fail, print_json, resolve_model
from app.core.files.untrusted import clean_line

if TYPE_CHECKING:
    from app.core.gguf.info import GGUFInfo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="show a GGUF model's architecture, sizes, context and chat template")
    add_model_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--tensors", action="store_true", help="with --json: include the tensor table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.core.gguf.info import choose_chat_template
    from app.core.predict.recurrent import layer_kinds, state_bytes

    info = inspect_or_fail(resolve_model(args.model))
    if info is None:
        return 1
    choice = choose_chat_template(info)
    if args.json:
        data = info.to_dict(tensors=args.tensors)
        data["chat_template_choice"] = {"name": choice.name, "source": choice.source}
        data["layer_kinds"] = [{"layers": n, "kind": kind} for n, kind in layer_kinds(info)]
        data["recurrent_state_bytes_per_sequence"] = state_bytes(info)
        data["metadata"] = {k: v for k, v in data["metadata"].items() if v is not None}
        print_json(data)
        return 0
    for label, value in describe(info, choice.name, choice.source):
        print(f"{label:<22} {clean_line(value)}")  # name, path: from the file
    return 0


def describe(info: GGUFInfo, template_name: str, template_source: str) -> list[tuple[str, str]]:
    """Label/value lines for humans."""
    from app.core.metrics.phase import fmt_bytes
    from app.core.predict.recurrent import layer_summary, recurrent_layers

    heads = _per_layer_text(info.n_head)
    recurrent = set(recurrent_layers(info))
    if recurrent and len(recurrent) < info.n_layers:  # a hybrid: KV heads only where there is attention
        kv_heads = _per_layer_text([h for il, h in enumerate(info.n_head_kv) if il not in recurrent])
        kv_heads += f" (in the attention layers; {len(recurrent)} recurrent layers keep none)"
    else:
        kv_heads = _per_layer_text(info.n_head_kv)
    kinds = layer_summary(info)
    swa = "none"
    if info.sliding_window:
        swa = f"{info.sliding_window} tokens on {info.n_swa_layers} of {info.n_layers} layers"
        if info.swa_pattern:
            swa += f" ({info.swa_pattern} sliding:full)"
    if any(t.name.endswith(".attn_sinks.weight") for t in info.tensors):  # gpt-oss: a learned logit per head
        swa += "; attention sinks (one learned logit per head)"
    experts = f"{info.expert_used_count} of {info.expert_count} active" if info.is_moe else "dense (no experts)"
    if template_source == "gguf":
        template = f"in the file ({len(info.chat_template or '')} characters)"
    elif template_source == "architecture":
        template = f"none in the file; using built-in '{template_name}' (from the architecture)"
    else:
        template = f"none in the file; falling back to '{template_name}'"
    output = "tied to token_embd (no output.weight)" if info.tied_output else "separate output.weight"
    return [
        ("file", str(info.path)),
        ("name", info.name),
        ("architecture", info.architecture),
        ("quantization", f"{info.file_type} ({info.bits_per_weight:.2f} bits/weight)"),
        ("parameters", f"{info.n_params:,} ({info.n_params / 1e6:.0f} M)"),
        ("tensor data", f"{fmt_bytes(info.tensor_bytes)} (file {fmt_bytes(info.file_size or 0)})"),
        ("layers", f"{info.n_layers}: {kinds}" if kinds else str(info.n_layers)),
        ("embedding", str(info.n_embd)),
        ("attention heads", heads),
        ("KV heads", kv_heads),
        ("head size (K/V)", f"{info.head_dim_k} / {info.head_dim_v}"),
        ("sliding window", swa),
        ("trained context", f"{info.n_ctx_train:,} tokens"),
        ("vocabulary", f"{info.n_vocab:,} tokens"),
        ("token embedding", fmt_bytes(info.token_embd_bytes)),
        ("output matrix", output),
        ("experts", experts),
        ("chat template", template),
    ]


def _per_layer_text(values: list[int]) -> str:
    uniq = sorted(set(values))
    if len(uniq) <= 1:
        return str(uniq[0] if uniq else 0)
    return f"{min(values)}-{max(values)} (varies by layer)"
