"""The model's preset in the window: applied when a model is chosen, edited in PresetDialog.

The load options reach the engine through MainWindow.load_config (app.core.predict.load_plan, as in the CLI); this
module applies the generation options of the same plan: the sampling panel's values, the context-overflow
policy, and the system prompt of chats started from now on (and of the open chat while it is still empty).

The sampling panel is also what the window saves as the global sampling defaults on close. So that a preset's
values do not leak into them, `global_sampling` gives the panel's values with those the preset put there,
and that nobody changed since, swapped back for the settings' own.

Loading the model already applied again (Reload, Eject then Reload, a reload for new settings) keeps the
panel as the user left it: the preset's values are put there when its model is chosen, or the preset or the
settings change, never over values set for the model in use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from app.core.config.settings import SamplingDefaults
from app.core.predict.load_plan import PRESET, SAMPLING_KEYS, plan_load

if TYPE_CHECKING:
    from app.ui.window.main_window import MainWindow


class ModelPresetControl(QObject):
    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.base = window.settings.sampling  # the settings' sampling, without any preset
        self.applied: dict[str, Any] = {}  # sampling values the preset put in the panel
        self.model: Path | None = None

    def global_sampling(self, panel: SamplingDefaults | None = None) -> SamplingDefaults:
        """The panel's values, minus what the current preset put there untouched: the defaults to save."""
        values = (panel or self.window.sampling_panel.values()).model_dump()
        for key, value in self.applied.items():
            if values[key] == value:
                values[key] = getattr(self.base, key)
        return SamplingDefaults(**values)

    def settings_changed(self) -> None:
        """The settings were edited (the Settings dialog): the panel shows them, with the preset over them."""
        self.applied = {}
        self.window.sampling_panel.set_values(self.window.settings.sampling)
        self.window.session.context_overflow = self.window.settings.context_overflow  # no model chosen yet
        if self.model is not None:
            self.apply(self.model, force=True)

    def apply(self, model: Path, force: bool = False) -> None:
        """Put the model's generation options in the window (its load options go through load_config); for
        the model whose options are there already, only with `force` (its preset or the settings changed)."""
        w = self.window
        if model == self.model and not force:
            return  # a reload: the panel's values are the user's choice for this model, not to be undone
        self.base = self.global_sampling()
        w.settings.sampling = self.base
        self.model = model
        plan = plan_load(model, w.settings, tuned=lambda _: None)  # the tune result holds no generation option
        sampling = plan.sampling_defaults()
        self.applied = {key: getattr(sampling, key) for key in SAMPLING_KEYS if plan.sources[key] == PRESET}
        w.sampling_panel.set_values(sampling)
        w.session.context_overflow = plan.values["context_overflow"]
        previous_default = w.session.default_system_prompt
        w.session.default_system_prompt = plan.values["system_prompt"] or ""
        conv = w.session.conversation
        # The open chat takes the new model's system prompt only while nothing was said in it and its prompt is
        # empty or the one the previous model's preset put there: a system prompt belongs to its chat.
        if conv is not None and conv.system_prompt in ("", previous_default) \
                and not w.store.messages(conv.id):
            w.sampling_panel.system_prompt.setPlainText(w.session.default_system_prompt)  # saved via its signal

    def open_dialog(self) -> None:
        from app.ui.model_bar.preset_dialog import PresetDialog

        w = self.window
        model = w.session.model_path
        if not model:
            w.banner.show_message("Choose a model first: a preset belongs to one model file.")
            return
        old = w.load_config(Path(model))
        from app.core.chat.model_usage import model_usage

        dialog = PresetDialog(w.settings, Path(model), w.sampling_panel.values(), w, usage=model_usage(w.store, model))
        if not dialog.exec():
            return
        from app.core.models.presets import set_preset

        preset = dialog.result_preset()
        base = self.global_sampling().model_dump()
        for key in (preset.sampling.model_dump(exclude_none=True) if preset is not None else {}):
            base[key] = getattr(self.base, key)  # what the preset now holds is not a new global default
        # The panel shows the plain settings for a moment, so that apply() takes them as its base.
        self.applied = {}
        w.sampling_panel.set_values(SamplingDefaults(**base))
        set_preset(w.settings, model, preset)
        self.apply(Path(model), force=True)
        if old != w.load_config(Path(model)):
            w._reload_for_settings()  # load options changed: reload (asks first during a reply)
        w.save_settings()
