"""How often the window redraws while a reply streams.

Every redraw is CPU time. When llama.cpp's threads occupy every core (a 2-core laptop, or threads set to
the core count), the window's work is taken from decoding: one llama.cpp thread is preempted and the other
waits for it at the next barrier, so each millisecond the window draws costs about a millisecond of
decode (measured with scripts/bench_gui: decode through the window fell about 1 % per 1 % of a core the
window used). There the window paces itself: text 15×/s, live numbers 2×/s, the live histogram once a
second. With a core to spare, it streams at 30 updates/s. Pure: no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pacing:
    text_ms: int  # the message view takes new tokens this often
    cards_ms: int  # the dashboard's live numbers (decode rate, ITL) while streaming
    histogram_ms: int  # the live ITL histogram (a pyqtgraph redraw: the costliest live update)
    shares_cores: bool  # llama.cpp's threads leave no core for the window

    def describe(self) -> str:
        if self.shares_cores:
            return (f"llama.cpp uses every core: the window updates {1000 // self.text_ms}×/s to leave "
                    "the CPU to decoding")
        return f"a core to spare: the window updates {1000 // self.text_ms}×/s"


ROOMY = Pacing(text_ms=33, cards_ms=250, histogram_ms=500, shares_cores=False)
SHARED = Pacing(text_ms=66, cards_ms=500, histogram_ms=1000, shares_cores=True)


def view_pacing(engine_threads: int | None, logical_cpus: int | None, all_on_gpu: bool = False) -> Pacing:
    """`SHARED` when the engine's decode threads cover every logical CPU, else `ROOMY`. Unknown counts (a
    remote server decodes elsewhere) and a model wholly on the GPU leave the CPU to the window."""
    if not engine_threads or not logical_cpus or all_on_gpu:
        return ROOMY
    return SHARED if engine_threads >= logical_cpus else ROOMY


def all_layers_on_gpu(n_gpu_layers: int, metadata: dict[str, str]) -> bool:
    """Whether llama.cpp offloaded every layer (-1 means all; else compare with GGUF's block_count)."""
    if n_gpu_layers < 0:
        return True
    blocks = [v for k, v in metadata.items() if k.endswith(".block_count")]
    try:
        return n_gpu_layers > 0 and bool(blocks) and n_gpu_layers >= int(blocks[0])
    except ValueError:
        return False
