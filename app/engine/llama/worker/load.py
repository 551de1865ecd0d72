"""Loading a model in the engine process: a Python pre-flight of the GGUF header, then llama.cpp's own load
with progress events and cancellation, then the `Loaded` description (buffer sizes from llama.cpp's log).
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from typing import TYPE_CHECKING, Any

import llama_cpp

from app.core.chat.templates import select_template, tool_format
from app.core.metrics.evidence import offloaded_layers
from app.core.predict.threads import default_threads
from app.engine import protocol as P
from app.engine.llama.draft_model import open_draft
from app.engine.llama.expert_placement import ExpertOverrides
from app.engine.llama.live import warm_up
from app.engine.llama.worker.llama_templates import templates_left_to_the_app
from app.engine.llama.worker.logs import rss
from app.engine.llama.worker.stream import send

if TYPE_CHECKING:
    from app.engine.llama.worker.engine import Engine

KV_TYPES = {"f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0, "q4_0": llama_cpp.GGML_TYPE_Q4_0,
            "f32": llama_cpp.GGML_TYPE_F32}


def load_model(engine: Engine, cfg: P.LoadConfig) -> None:
    engine.unload()
    if not os.path.isfile(cfg.model_path):
        send(P.Error(None, "load_failed", f"Model file not found: {cfg.model_path}"))
        return
    problem, engine._gguf = check_gguf_header(cfg.model_path)
    if problem:
        send(P.Error(None, "load_failed", problem))
        return
    for name in (cfg.type_k, cfg.type_v):
        if name not in KV_TYPES:
            send(P.Error(None, "load_failed", f"Unknown KV cache type {name!r}; use one of {sorted(KV_TYPES)}"))
            return
    mark = engine.log.mark()
    send(P.Progress("loading", 0.0))
    t0 = time.perf_counter()
    try:
        engine.llm = engine._construct(cfg)
    except Exception as exc:  # noqa: BLE001 - llama.cpp reports a bad file as a generic failure
        reason = explain_load_failure(engine.log.lines[mark:], exc, engine._load_cancelled)
        engine.llm = None
        send(P.Error(None, "load_failed", reason))
        return
    load_ms = (time.perf_counter() - t0) * 1000.0
    engine.config = cfg
    llm = engine.llm
    meta = {k: str(v) for k, v in llm.metadata.items() if len(str(v)) < 4096 or k == "tokenizer.chat_template"}
    arch = meta.get("general.architecture", "unknown")
    engine.template = select_template(arch, meta.get("tokenizer.chat_template"), cfg.chat_template)
    buffers = engine.log.buffers_since(mark)
    placed = offloaded_layers(engine.log.lines[mark:])
    kv_bytes = int(sum(v for k, v in buffers.items() if k.startswith("KV:")) * 1024 * 1024)
    ctx = llm._ctx.ctx
    n_threads = llm.context_params.n_threads
    n_gpu_layers = cfg.n_gpu_layers if llama_cpp.llama_supports_gpu_offload() else 0
    engine.loaded = P.Loaded(
        model_path=cfg.model_path,
        load_ms=load_ms,
        n_ctx=llama_cpp.llama_n_ctx(ctx),
        n_ctx_train=llm._model.n_ctx_train(),
        n_vocab=llm.n_vocab(),
        n_params=llm._model.n_params(),
        model_size=llm._model.size(),
        architecture=arch,
        model_desc=llm._model.desc(),
        chat_template_name=engine.template.name,
        chat_template_source=engine.template.source,
        n_gpu_layers=n_gpu_layers,
        type_k=cfg.type_k,
        type_v=cfg.type_v,
        flash_attn=engine._flash_used,
        swa_full=cfg.swa_full,
        buffers_mib=buffers,
        kv_bytes_allocated=kv_bytes,
        kv_cells_allocated=llama_cpp.llama_n_ctx(ctx),
        n_threads=n_threads,
        n_threads_batch=llm.context_params.n_threads_batch,
        rss_bytes=rss(),
        metadata={k: v for k, v in meta.items() if not k.startswith("tokenizer.ggml.")},
        tool_format=tool_format(engine.template),
        gpu_layers_requested=cfg.n_gpu_layers if cfg.gpu_expected else n_gpu_layers,
        gpu_layers_placed=placed[0] if placed else None,
        gpu_layers_total=placed[1] if placed else None,
    )
    if cfg.draft_model:
        engine.draft, problem = open_draft(cfg.model_path, cfg.draft_model, llm, cfg.draft_max)
        if problem:
            engine.unload()
            send(P.Error(None, "load_failed", problem))
            return
    send(P.Progress("loading", 1.0))
    send(engine.loaded)
    # after Loaded, so the window is not kept waiting; a request sent meanwhile waits its turn
    engine._warmup_ms = warm_up(llm) if cfg.warmup else 0.0


def construct(engine: Engine, cfg: P.LoadConfig) -> Any:
    engine._load_cancelled = False
    last = [-1.0]

    def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
        if fraction - last[0] >= 0.02 or fraction >= 1.0:
            last[0] = fraction
            send(P.Progress("loading", float(fraction)))
        if engine.poll_interrupt("load"):
            engine._load_cancelled = True
            return False  # llama.cpp aborts the load
        return True

    callback = llama_cpp.llama_progress_callback(on_progress)
    # Llama() calls it through the ctypes module (`llama_cpp.llama_cpp`), not the package namespace.
    bindings = llama_cpp.llama_cpp
    original = bindings.llama_model_default_params

    experts = ExpertOverrides(cfg.n_cpu_moe)  # alive until Llama() returns: llama.cpp reads it while loading

    def params_with_progress() -> Any:
        params = original()
        params.progress_callback = callback
        params.tensor_buft_overrides = experts.address
        return params

    # Llama() offers no progress hook; it builds its params from this function, so wrap it for one call.
    bindings.llama_model_default_params = params_with_progress
    try:
        flash: Any = cfg.flash_attn
        if cfg.type_v != "f16" and flash is None:
            flash = True  # a quantized V cache needs flash attention in llama.cpp
        with templates_left_to_the_app():  # llama-cpp-python would compile them, unbounded, as it loads
            llm = llama_cpp.Llama(
                model_path=cfg.model_path,
                n_ctx=cfg.n_ctx,
                n_threads=cfg.n_threads or default_threads(),
                n_threads_batch=cfg.n_threads_batch or cfg.n_threads or default_threads(batch=True),
                n_gpu_layers=cfg.n_gpu_layers,
                n_batch=cfg.n_batch,
                n_ubatch=cfg.n_ubatch,
                type_k=KV_TYPES[cfg.type_k],
                type_v=KV_TYPES[cfg.type_v],
                flash_attn=bool(flash),
                swa_full=cfg.swa_full,
                seed=cfg.seed if cfg.seed >= 0 else llama_cpp.LLAMA_DEFAULT_SEED,
                use_mmap=cfg.use_mmap or not fits_in_memory(cfg.model_path),
                verbose=False,
            )
    finally:
        bindings.llama_model_default_params = original
    engine._flash_used = bool(flash)
    return llm



def fits_in_memory(path: str, share: float = 0.8) -> bool:
    """Whether reading the file into memory leaves room: its size under `share` of the available RAM. A file
    that does not fit is mapped instead (slow, but it runs where reading it in would swap or be killed)."""
    import psutil

    try:
        return os.path.getsize(path) < share * psutil.virtual_memory().available
    except OSError:  # no size to compare: read it in, as asked (llama.cpp then names the file's problem)
        return True


def check_gguf_header(path: str) -> tuple[str | None, Any]:
    """Pre-flight in Python before native code sees the file: bad magic, a header cut short, absurd
    counts, tensors past the end of the file (a truncated download) all get a plain-words reason.
    Returns (problem or None, GGUFInfo or None)."""
    from app.core.gguf.info import GGUFError, inspect_gguf

    try:
        return None, inspect_gguf(path)
    except GGUFError as exc:
        return f"{os.path.basename(path)} is not a usable GGUF model: {exc}", None
    except OSError as exc:
        return f"Cannot read the model file: {exc}", None


def explain_load_failure(log_lines: list[str], exc: Exception, cancelled: bool) -> str:
    if cancelled:
        return "Loading was cancelled."
    errors = [ln.strip() for ln in log_lines if re.search(r"error|failed|invalid|corrupt|truncat", ln, re.IGNORECASE)]
    detail = "; ".join(errors[-3:]) if errors else str(exc)
    return f"llama.cpp could not load this model: {detail}"
