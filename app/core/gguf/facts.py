"""The facts about a GGUF model that estimators use (`GGUFInfo`), and one tensor's entry (`TensorInfo`), as
read from its header by app.core.gguf.info.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TensorInfo:
    name: str
    ggml_type: str
    shape: list[int]  # ggml order: shape[0] is the row length
    n_elements: int
    n_bytes: int
    offset: int  # relative to the start of the data section



@dataclass
class GGUFInfo:
    """Facts about one GGUF model, enough to estimate memory and speed without loading it."""

    architecture: str
    name: str
    n_params: int
    n_layers: int
    n_head: list[int]  # per layer
    n_head_kv: list[int]  # per layer (0: layer keeps no KV, e.g. recurrent)
    head_dim_k: int
    head_dim_v: int
    n_embd: int
    n_ff: int
    n_ctx_train: int
    sliding_window: int  # 0: none
    swa_layers: list[bool]  # per layer: True = sliding-window attention
    file_type: str  # "Q4_K_M", "F16", ...
    tensor_bytes: int
    layer_bytes: list[int]  # per repeating layer
    expert_bytes: list[int]  # per layer: bytes of routed-expert tensors (part of layer_bytes)
    token_embd_bytes: int
    output_bytes: int  # the output matrix; equals token_embd_bytes when tied
    other_bytes: int  # outside layers, embedding and output (norms, rope tables...)
    tied_output: bool
    n_vocab: int
    expert_count: int
    expert_used_count: int
    chat_template: str | None
    header_size: int
    data_offset: int
    file_size: int | None
    path: str | None = None
    gguf_version: int = 3
    size_label: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)

    # -- derived facts
    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def n_head_kv_max(self) -> int:
        return max(self.n_head_kv, default=0)

    @property
    def n_swa_layers(self) -> int:
        return sum(self.swa_layers)

    @property
    def swa_pattern(self) -> str:
        """'5:1' = five sliding-window layers to one full layer; '' without sliding windows."""
        n_swa = self.n_swa_layers
        if not self.sliding_window or n_swa == 0:
            return ""
        n_full = self.n_layers - n_swa
        if n_full == 0:
            return "all sliding"
        ratio = n_swa / n_full
        return f"{round(ratio)}:1" if abs(ratio - round(ratio)) < 0.5 / n_full + 1e-9 else f"{n_swa}:{n_full}"

    @property
    def is_moe(self) -> bool:
        return self.expert_count > 1

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.tensor_bytes / self.n_params if self.n_params else 0.0

    def kv_row_elements(self, il: int) -> tuple[int, int]:
        """Elements of one K row and one V row of layer il (one token, all KV heads)."""
        return self.head_dim_k * self.n_head_kv[il], self.head_dim_v * self.n_head_kv[il]

    def to_dict(self, tensors: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not tensors:
            data.pop("tensors")
        data["swa_pattern"] = self.swa_pattern
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GGUFInfo:
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["tensors"] = [TensorInfo(**t) for t in data.get("tensors", [])]
        return cls(**kwargs)
