"""The main window's answers to the engine: its state and load progress in the status bar, the loaded model's
line and tooltip, errors as a banner (with Restart when the engine died), and its memory stats."""

from __future__ import annotations

import re
from pathlib import Path

from app.core.metrics.phase import fmt_bytes
from app.core.metrics.slowness import gpu_shortfall, placement_warning
from app.engine import protocol as P
from app.ui.chat.too_long import read_refusal
from app.ui.dashboard.live_numbers import LiveKV
from app.ui.engine_link import engine_qt as E
from app.ui.toolkit.safe_text import set_plain_tooltip
from app.ui.toolkit.whole_parts_label import dropping_parts
from app.ui.window import onboarding
from app.ui.window.base import WindowBase
from app.ui.window.status_line import join_parts

_QUANT_RE = re.compile(r"(?i)(IQ\d_[A-Z]+|Q\d_K_[SML]|Q\d_K|Q\d_\d|F16|BF16|F32|MXFP4)")


def quant_of(loaded: P.Loaded) -> str:
    for text in (Path(loaded.model_path).name, loaded.model_desc):
        m = _QUANT_RE.search(text)
        if m:
            return m.group(1).upper()
    return loaded.model_desc or "?"


def model_line_choices(loaded: P.Loaded) -> list[str]:
    """The toolbar's model line, whole, then shorter as the toolbar narrows: the least important part goes
    first (the load time, then where the template came from, then the template); the quant stays last."""
    if loaded.chat_template_source == "server":
        return dropping_parts("remote server · its own chat template · timings measured client-side")
    quant, ctx = quant_of(loaded), f"ctx {loaded.n_ctx}"
    template = f"template {loaded.chat_template_name}"
    source = f"{template} ({loaded.chat_template_source})"
    return [f"{quant} · {ctx} · {source} · load {loaded.load_ms:.0f} ms", f"{quant} · {ctx} · {source}",
            f"{quant} · {ctx} · {template}", f"{quant} · {ctx}", quant]


class EngineEvents(WindowBase):
    def _engine_state(self, state: str) -> None:
        pid = self.engine.pid
        text = f"engine: {state}" + (f" (pid {pid})" if pid and state != E.DEAD else "")
        self.state_label.setText(text)
        self.progress.setVisible(state == E.LOADING)
        if state == E.LOADING:
            self.progress.setValue(0)
        if self.engine.loaded_info is None:  # ejected: the KV cells were the model's, gone with it
            self.status_line.set_part("memory", "")
        self._update_buttons()

    def _progress(self, stage: str, fraction: float) -> None:
        self.progress.show()
        self.progress.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        # the engine's stage is "loading" itself as often as not: "engine: loading — loading 100 %" said it twice
        doing = "loading" if stage.strip().lower() in ("", "loading") else f"loading — {stage}"
        self.state_label.setText(f"engine: {doing} {100 * fraction:.0f} %")

    def _loaded(self, loaded: P.Loaded) -> None:
        self.progress.hide()
        self.banner.model_changed(loaded.model_path)  # "Still using X" is stale once Y is in use
        self.session.model_path = loaded.model_path
        self._select_model_in_combo(loaded.model_path)
        remote = loaded.chat_template_source == "server"
        if not remote:  # a server URL is not a file to reopen or to list in the library
            self.settings.last_model = loaded.model_path
            self.last_used.loaded(loaded.model_path)  # the Library's "Last used", at once
            note = onboarding.demo_model_note(loaded.model_path, self.store)
            if note and not self.banner.isVisibleTo(self):  # never hide a warning that is already shown
                self.banner.show_message(note, info=True)
        if self.lab_page.widget is not None:
            self.lab_page.widget.set_model(loaded.model_path)  # type: ignore[attr-defined]
        self._show_model_line(loaded)
        # The status bar's memory line is the local engine's: a server's memory is on its own machine.
        self.status_line.set_part("memory", "memory: on the server" if remote else "")
        self._engine_state(self.engine.state)  # the state line after a load, whatever came before it
        if self.banner.restart_button.isVisible() or "engine" in self.banner.text().lower():
            self.banner.hide()
        shortfall = gpu_shortfall(loaded.gpu_layers_requested, loaded.gpu_layers_placed, loaded.gpu_layers_total)
        if shortfall and not remote:  # "100 % GPU" asked, the CPU doing it: say so at once, not only when slow
            self.banner.show_message(placement_warning(shortfall), while_model=loaded.model_path)
        # the roofs are the model's and its threads' (measured first, once, when nothing is stored yet)
        self.bandwidth.request(loaded, measure=self.measure_bandwidth_on_load and not self.bandwidth.known)
        self._update_buttons()

    def _show_model_line(self, loaded: P.Loaded) -> None:
        """The toolbar's line (and tooltip, the whole line first) about the model in use."""
        forms = model_line_choices(loaded)
        self.model_info.set_forms(forms)
        set_plain_tooltip(self.model_info,
            f"{forms[0]}\n{loaded.model_desc}\n{loaded.n_params / 1e6:.0f} M parameters, "
            f"{fmt_bytes(loaded.model_size)}\n"
            f"architecture {loaded.architecture}, trained context {loaded.n_ctx_train}\n"
            f"chat template: {loaded.chat_template_name} (from {loaded.chat_template_source})\n"
            f"KV cache {loaded.type_k}/{loaded.type_v}, {fmt_bytes(loaded.kv_bytes_allocated)}; "
            f"threads {loaded.n_threads}/{loaded.n_threads_batch}; GPU layers {loaded.n_gpu_layers}\n"
            f"streaming: {self.engine.pacing.describe()}")

    def _engine_error(self, error: P.Error) -> None:
        in_use = self.engine.loaded_info
        if error.fatal:
            self.status_line.set_part("memory", "")  # no engine, no memory to show
            self.model_info.setText("engine stopped")
            first = error.message.strip().splitlines()[0] if error.message.strip() else "The engine stopped."
            self.banner.show_message(f"{first} Your text so far is saved; restart the engine to go on "
                                     f"(Continue or Regenerate).", restart=True,
                                     details=error.message)  # the engine's last log lines
        elif error.kind == "connect_failed":
            still = f" Still using {in_use.model_desc or Path(in_use.model_path).name}." if in_use else ""
            self.banner.show_message(f"Could not connect to the server: {error.message}.{still}",
                                     while_model=in_use.model_path if in_use else None)
            if in_use is not None:
                self._show_model_line(in_use)
                self._select_model_in_combo(in_use.model_path)
            else:
                self.model_info.setText("no model loaded")
        elif error.kind == "load_failed":
            previous = self.engine.restoring
            if previous is not None:  # the engine loads the model used before again
                name = Path(previous.model_path).name
                self.model_info.setText(f"load failed · loading {name} again")
                self.banner.show_message(f"Could not load the model: {error.message} Loading {name} again, "
                                         f"the model in use before.", while_model=previous.model_path)
            else:
                self.model_info.setText("load failed")
                self.status_line.set_part("memory", "")
                self.banner.show_message(f"Could not load the model: {error.message}")
        elif read_refusal(error) is None:  # a message over the context: too_long_flow says it and offers a way out
            self.banner.show_message(f"{error.kind.replace('_', ' ')}: {error.message}")
        self.progress.hide()
        self._update_buttons()

    def _stats(self, stats: P.Stats) -> None:
        self._rss_text = f"engine RSS {fmt_bytes(stats.rss_bytes)}"
        kv = f"KV {stats.kv_cells_used}/{stats.kv_cells_allocated} cells" if stats.loaded else ""
        self.status_line.set_part("memory", join_parts([self._rss_text, kv]))

    def _live_kv(self, kv: LiveKV) -> None:
        """While a reply streams the engine sends no stats: the KV count follows the dashboard's live one."""
        rss = getattr(self, "_rss_text", "")
        self.status_line.set_part("memory", join_parts([rss, f"KV {kv.cells_used}/{kv.cells_allocated} cells"]))

    def restart_engine(self) -> None:
        self.banner.hide()
        self.engine.restart()
        if self.engine.loaded_info is None and self.session.model_path and self.engine.state != E.LOADING:
            self.load_model(Path(self.session.model_path))
