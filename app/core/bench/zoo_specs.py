"""The zoo's models: the shapes and metadata llama.cpp reads for each, from the published config.json files.

Two generations: the 2024 one the speed and memory models were first fitted on (Qwen2.5, Llama 3.x, Mistral,
Gemma 2, OLMoE) and the 2025-26 one people run now: an MXFP4 mixture of experts with attention sinks and
alternating 128-token sliding windows (gpt-oss-20b), a 128-expert MoE (Qwen3-30B-A3B), a dense model with
per-head q/k norms (Qwen3-8B), a 5:1 sliding-window model (Gemma 3 4B, text part), and two hybrids whose most
layers keep a recurrent state instead of a KV cache: LFM2's short convolutions and Granite 4's Mamba-2 layers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ZooSpec:
    """The shapes and metadata llama.cpp reads for one published model."""

    key: str  # short name used on the command line and in file names
    name: str
    arch: str  # llama.cpp's architecture name ("llama", "qwen3moe", "gpt-oss", "granitehybrid", ...)
    n_layers: int
    n_embd: int
    n_ff: int  # per expert for MoE
    n_head: int
    n_head_kv: int  # in the attention layers
    head_dim: int
    n_vocab: int
    n_ctx: int
    tied: bool
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    sliding_window: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    qkv_bias: bool = False
    params_b: float = 0.0  # published parameter count (billions), for display
    qk_norm: bool = False  # per-head RMS norms of q and k (Qwen3, Gemma 3, LFM2)
    sinks: bool = False  # gpt-oss: attention sinks, biased output projection, router and experts
    attn_layers: tuple[int, ...] = ()  # hybrids: the attention layers, the others recurrent (): all attention
    recurrent: str = ""  # "shortconv" (LFM2) | "mamba2" (Granite 4 hybrids)
    conv_kernel: int = 0  # LFM2's L_cache, Mamba's d_conv
    ssm_inner: int = 0  # Mamba-2: d_inner, d_state, heads (the time-step rank), groups
    ssm_state: int = 0
    ssm_heads: int = 0
    ssm_groups: int = 0
    release: str = "Q4_K_M"  # the quantization its published GGUFs use

    @property
    def small(self) -> bool:
        """Small enough for F16 files and quick tests."""
        return self.params_b < 2.5

    def has_attention(self, il: int) -> bool:
        return not self.recurrent or il in self.attn_layers

    @property
    def head_count_kv(self) -> int | list[int]:
        """The GGUF value: one number, or per layer with 0 for a hybrid's recurrent layers."""
        if not self.recurrent:
            return self.n_head_kv
        return [self.n_head_kv if self.has_attention(il) else 0 for il in range(self.n_layers)]


ZOO: dict[str, ZooSpec] = {s.key: s for s in (
    ZooSpec("qwen2.5-0.5b", "Qwen2.5-0.5B", "qwen2", 24, 896, 4864, 14, 2, 64, 151936, 32768, True,
            rope_base=1e6, rms_eps=1e-6, qkv_bias=True, params_b=0.49),
    ZooSpec("llama-3.2-1b", "Llama-3.2-1B", "llama", 16, 2048, 8192, 32, 8, 64, 128256, 131072, True,
            rope_base=5e5, params_b=1.24),
    ZooSpec("gemma-2-2b", "Gemma-2-2B", "gemma2", 26, 2304, 9216, 8, 4, 256, 256000, 8192, True,
            rms_eps=1e-6, sliding_window=4096, params_b=2.61),
    ZooSpec("llama-3.2-3b", "Llama-3.2-3B", "llama", 28, 3072, 8192, 24, 8, 128, 128256, 131072, True,
            rope_base=5e5, params_b=3.21),
    ZooSpec("qwen2.5-7b", "Qwen2.5-7B", "qwen2", 28, 3584, 18944, 28, 4, 128, 152064, 32768, False,
            rope_base=1e6, rms_eps=1e-6, qkv_bias=True, params_b=7.62),
    ZooSpec("mistral-7b", "Mistral-7B-v0.3", "llama", 32, 4096, 14336, 32, 8, 128, 32768, 32768, False,
            rope_base=1e6, params_b=7.25),
    ZooSpec("llama-3.1-8b", "Llama-3.1-8B", "llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072, False,
            rope_base=5e5, params_b=8.03),
    ZooSpec("olmoe-1b-7b", "OLMoE-1B-7B", "olmoe", 16, 2048, 1024, 16, 16, 128, 50304, 4096, False,
            n_expert=64, n_expert_used=8, params_b=6.92),
    # the 2025-26 generation
    ZooSpec("gpt-oss-20b", "gpt-oss-20b", "gpt-oss", 24, 2880, 2880, 64, 8, 64, 201088, 131072, False,
            rope_base=150000.0, sliding_window=128, n_expert=32, n_expert_used=4, qkv_bias=True, sinks=True,
            params_b=20.91, release="MXFP4"),
    ZooSpec("qwen3-30b-a3b", "Qwen3-30B-A3B", "qwen3moe", 48, 2048, 768, 32, 4, 128, 151936, 40960, False,
            rope_base=1e6, rms_eps=1e-6, n_expert=128, n_expert_used=8, qk_norm=True, params_b=30.53),
    ZooSpec("qwen3-8b", "Qwen3-8B", "qwen3", 36, 4096, 12288, 32, 8, 128, 151936, 40960, False,
            rope_base=1e6, rms_eps=1e-6, qk_norm=True, params_b=8.19),
    ZooSpec("gemma-3-4b", "Gemma-3-4B (text)", "gemma3", 34, 2560, 10240, 8, 4, 256, 262208, 131072, True,
            rope_base=1e6, rms_eps=1e-6, sliding_window=1024, qk_norm=True, params_b=3.88),
    ZooSpec("lfm2-1.2b", "LFM2-1.2B", "lfm2", 16, 2048, 8192, 32, 8, 64, 65536, 128000, True,
            rope_base=1e6, qk_norm=True, attn_layers=(2, 5, 8, 10, 12, 14), recurrent="shortconv", conv_kernel=3,
            params_b=1.17, release="Q8_0"),
    ZooSpec("granite-4.0-h-micro", "Granite-4.0-H-Micro", "granitehybrid", 40, 2048, 8192, 32, 8, 64, 100352,
            131072, True, attn_layers=(5, 15, 25, 35), recurrent="mamba2", conv_kernel=4, ssm_inner=4096,
            ssm_state=128, ssm_heads=64, ssm_groups=1, params_b=3.19),
)}
