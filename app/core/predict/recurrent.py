"""Layers that keep a recurrent state instead of a KV cache, and the "RS buffer" llama.cpp allocates for them.

Mirrors llama_memory_recurrent and llama_hparams::n_embd_r / n_embd_s (the llama.cpp of llama-cpp-python 0.3.36):
every recurrent layer holds two f32 tensors of `rows = max(1, n_seq) x (1 + n_rs_seq)` rows (llama-cpp-python
leaves n_rs_seq, the rollback snapshots, at 0):
* r, the convolution state: LFM2's short convolution keeps n_embd x (L_cache - 1); a Mamba layer keeps
  (d_conv - 1) x (d_inner + 2 x n_group x d_state) (Mamba-1: n_group 0);
* s, the SSM state: d_state x d_inner (none for a short convolution).
The state does not grow with the context: one fixed block per sequence, on the device of its layer.
A hybrid marks its recurrent layers with 0 KV heads (LFM2, Granite 4 hybrids, Jamba, Falcon-H1); pure Mamba
models are recurrent in every layer.
"""

from __future__ import annotations

from app.core.gguf.info import GGUFInfo

F32 = 4
ALL_RECURRENT = {"mamba": "Mamba", "mamba2": "Mamba-2"}  # every layer recurrent
HYBRIDS = {"lfm2": "short-convolution", "lfm2moe": "short-convolution", "granitehybrid": "Mamba-2",
           "jamba": "Mamba", "falcon-h1": "Mamba-2"}  # recurrent where a layer has no KV heads


def _meta(info: GGUFInfo, key: str) -> int:
    value = info.metadata.get(f"{info.architecture}.{key}")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def recurrent_kind(info: GGUFInfo) -> str:
    """'Mamba-2', 'Mamba', 'short-convolution' or '' (no recurrent layers) for the model's recurrent layers."""
    arch = info.architecture
    if arch in ALL_RECURRENT:
        return ALL_RECURRENT[arch]
    if arch in HYBRIDS:
        if HYBRIDS[arch].startswith("Mamba"):  # Mamba-2 groups its B and C projections; Mamba-1 has none
            return "Mamba-2" if _meta(info, "ssm.group_count") > 0 else "Mamba"
        return HYBRIDS[arch]
    return ""


def recurrent_layers(info: GGUFInfo) -> list[int]:
    """Indices of the layers that keep a recurrent state."""
    if info.architecture in ALL_RECURRENT:
        return list(range(info.n_layers))
    if info.architecture in HYBRIDS:
        return [il for il in range(info.n_layers) if info.n_head_kv[il] == 0]
    return []


def state_row_elements(info: GGUFInfo) -> tuple[int, int]:
    """(r, s): f32 elements of one sequence's convolution state and SSM state in one recurrent layer."""
    l_cache = _meta(info, "shortconv.l_cache")
    if l_cache:
        return info.n_embd * (l_cache - 1), 0
    d_conv, d_inner = _meta(info, "ssm.conv_kernel"), _meta(info, "ssm.inner_size")
    d_state, n_group = _meta(info, "ssm.state_size"), _meta(info, "ssm.group_count")
    r = max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state)
    return r, d_state * d_inner


def state_bytes_per_layer(info: GGUFInfo, n_seq: int = 1, n_rs_seq: int = 0) -> int:
    """Bytes of one recurrent layer's state tensors (r and s) for `n_seq` sequences."""
    r, s = state_row_elements(info)
    return (r + s) * F32 * max(1, n_seq) * (1 + n_rs_seq)


def state_bytes(info: GGUFInfo, n_seq: int = 1) -> int:
    """The whole RS buffer (all recurrent layers) for `n_seq` sequences."""
    return len(recurrent_layers(info)) * state_bytes_per_layer(info, n_seq)


def layer_kinds(info: GGUFInfo) -> list[tuple[int, str]]:
    """(count, kind) of the model's layers: full attention, sliding-window attention, the recurrent kind."""
    recurrent = set(recurrent_layers(info))
    full = sum(1 for il in range(info.n_layers) if il not in recurrent and not info.swa_layers[il])
    swa = sum(1 for il in range(info.n_layers) if il not in recurrent and info.swa_layers[il])
    kinds = [(full, "attention"), (swa, "sliding-window attention"), (len(recurrent), recurrent_kind(info))]
    return [(n, kind) for n, kind in kinds if n]


def layer_summary(info: GGUFInfo) -> str:
    """'4 attention + 36 Mamba-2 layers; recurrent state 74 MiB per sequence' ('' for plain attention)."""
    kinds = layer_kinds(info)
    if len(kinds) < 2 and not recurrent_layers(info):
        return ""
    text = " + ".join(f"{n} {kind}" for n, kind in kinds) + " layers"
    mib = state_bytes(info) / 2**20
    if mib:
        text += f"; recurrent state {mib:.0f} MiB per sequence" if mib >= 10 else \
            f"; recurrent state {mib:.2f} MiB per sequence"
    return text
