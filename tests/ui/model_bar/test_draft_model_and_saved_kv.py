"""The window's side of draft models and saved KV, on the fake engine: "Draft model…" reloads with the chosen draft
(and without it again), only for the model it was chosen for; loads carry the saved-KV folder and budget from
the settings, requests carry their chat; the decode card and the message's tooltip name the drafter that ran,
and the prompt card and tooltip say what was restored from disk, or why not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.chat.saved_kv import default_dir
from app.core.chat.store import ChatStore
from app.core.config import paths
from app.core.config import settings as S
from app.core.metrics.phase import PhaseMetrics
from app.engine import protocol as P
from app.ui.model_bar.draft_model_picker import DraftPickerDialog
from app.ui.window.main_window import MainWindow
from fake_window import make_window
from synth_gguf import write_synthetic_gguf

pytestmark = pytest.mark.gui


def _window(qtbot: Any, tmp_path: Path, settings: S.Settings | None = None) -> MainWindow:
    return make_window(qtbot, store=ChatStore(tmp_path / "chats.sqlite3"), settings=settings)


def _loads(win: MainWindow) -> list[P.LoadConfig]:
    return [c.config for c in win.engine.client.sent if isinstance(c, P.Load)]  # type: ignore[attr-defined]


def _pick(qtbot: Any, win: MainWindow) -> DraftPickerDialog:
    win.draft_action.trigger()
    dialog = win.draft_control.dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.ready, timeout=10_000)
    return dialog


def test_draft_model_reloads_with_the_draft_and_without_it_again(qtbot: Any, tmp_path: Path) -> None:
    models = paths.models_dir()
    main = write_synthetic_gguf(tmp_path / "main.gguf", n_vocab=300, n_layers=4)
    other_main = write_synthetic_gguf(tmp_path / "other-main.gguf", n_vocab=300, n_layers=4)
    small = write_synthetic_gguf(models / "small-draft.gguf", n_vocab=300, n_layers=1, n_embd=64, n_ff=128,
                                 n_head=2, n_head_kv=1)
    write_synthetic_gguf(models / "other-vocab.gguf", n_vocab=260)
    win = _window(qtbot, tmp_path, S.Settings(saved_kv_budget_mib=300))
    win.load_model(main)
    first = _loads(win)[-1]
    assert first.draft_model is None
    assert (first.kv_store_dir, first.kv_store_budget_mib) == (str(default_dir()), 300)  # saved KV, from settings

    dialog = _pick(qtbot, win)
    rows = {Path(dialog.list.item(i).data(dialog.ROLE)).name: dialog.list.item(i) for i in range(dialog.list.count())}
    dialog.list.setCurrentItem(rows["small-draft.gguf"])
    dialog.max.setValue(5)
    dialog.ok.click()
    cfg = _loads(win)[-1]
    assert len(_loads(win)) == 2 and (cfg.model_path, cfg.draft_model, cfg.draft_max) == (str(main), str(small), 5)

    dialog = _pick(qtbot, win)  # opened again: the draft in use is selected, and it can be turned off
    assert dialog.selected_path() == str(small) and dialog.draft_max() == 5
    dialog.ok.click()  # nothing changed: no reload
    assert len(_loads(win)) == 2

    win.load_model(other_main)  # the draft was chosen for `main`: another model loads without it
    assert _loads(win)[-1].draft_model is None
    win.load_model(main)
    assert _loads(win)[-1].draft_model == str(small)

    dialog = _pick(qtbot, win)
    off = next(b for b in dialog.buttons.buttons() if b.text() == "No draft model")
    off.click()
    cfg = _loads(win)[-1]
    assert cfg.model_path == str(main) and cfg.draft_model is None


def test_the_reply_names_its_drafter_and_what_was_restored_from_disk(qtbot: Any, tmp_path: Path) -> None:
    win = _window(qtbot, tmp_path)
    win.load_model(tmp_path / "m.gguf")
    win.input.setPlainText("hello")
    win.submit()
    gen = [c for c in win.engine.client.sent if isinstance(c, P.Generate)][-1]  # type: ignore[attr-defined]
    assert win.session.conversation is not None and gen.conversation_id == str(win.session.conversation.id)
    rid, reply_id = gen.request_id, win.session.streaming_message_id
    win.engine._dispatch(P.Prefilled(rid, 100, 16, 30.0, 60.0, 100, 0, 0.0, restored_tokens=84, restore_ms=28.8,
                                     restore_prefill_ms=1729.6))
    restored = "restored 84 tokens in 29 ms (prefill would take ~1730 ms)"
    assert win.dashboard.card_prompt.detail.text() == f"16 new · {restored}"  # live, at the first token
    metrics = {**PhaseMetrics(prompt_tokens=100, reused_tokens=84, prefill_tokens=16, prefill_ms=30.0,
                              decode_tokens=19, decode_ms=100.0, generated_tokens=20, draft_tokens=8, draft_accepted=6,
                              drafter="draft model", kv_restored_tokens=84, kv_restore_ms=28.8,
                              kv_restore_prefill_ms=1729.6).to_dict()}
    win.engine._dispatch(P.Done(request_id=rid, text="Hi!", finish_reason="stop", metrics=metrics))
    assert win.dashboard.card_decode.detail.text().endswith("· draft model 75 % accepted")
    assert win.dashboard.card_prompt.detail.text() == f"16 new · {restored}"
    tip = win.message_view.widget_for(reply_id).metrics_label.toolTip()
    assert "6/8 draft tokens accepted (75 %, draft model)" in tip and f"saved KV: {restored}" in tip

    # prompt lookup, and a saved state that could not be used
    win.input.setPlainText("again")
    win.submit()
    rid = [c for c in win.engine.client.sent if isinstance(c, P.Generate)][-1].request_id  # type: ignore[attr-defined]
    note = "saved KV of this chat not used: it is cut short; prefilled instead"
    metrics = {**PhaseMetrics(prompt_tokens=120, prefill_tokens=120, prefill_ms=90.0, decode_tokens=9,
                              decode_ms=50.0, generated_tokens=10, draft_tokens=4, draft_accepted=1,
                              drafter="prompt lookup", kv_restore_note=note).to_dict()}
    win.engine._dispatch(P.Done(request_id=rid, text="Hi again!", finish_reason="stop", metrics=metrics))
    assert win.dashboard.card_decode.detail.text().endswith("· lookup 25 % accepted")
    # the card keeps a short line and gives the whole reason on hover (it cut the reason at a narrow dock)
    assert win.dashboard.card_prompt.detail.text() == "120 new · 0 reused · saved KV not used (why: hover)"
    assert note in win.dashboard.card_prompt.detail.toolTip()
    last = win.message_view.message_ids()[-1]
    tip = win.message_view.widget_for(last).metrics_label.toolTip()
    assert "(25 %, prompt lookup)" in tip and f"saved KV: {note}" in tip


def test_the_saved_kv_budget_is_a_setting(qtbot: Any) -> None:
    from app.ui.settings.dialog import SettingsDialog

    dialog = SettingsDialog(S.Settings(saved_kv_budget_mib=300))
    qtbot.addWidget(dialog)
    assert dialog.saved_kv.value() == 300
    dialog.saved_kv.setValue(0)
    assert dialog.saved_kv.text() == "off" and dialog.result_settings().saved_kv_budget_mib == 0
    assert S.Settings().saved_kv_budget_mib == 2048  # 2 GiB unless set
