"""Settings survive a restart; a damaged file is set aside with a notice."""

from __future__ import annotations

import json
from dataclasses import replace

from app.core.chat.context import ContextPolicy, FlashAttention, LoadSettings
from app.core.hardware.memory import KVCacheType
from app.core.sampling.params import SamplerSettings
from app.core.settings import MAX_RECENT, SETTINGS_VERSION, Settings, SettingsStore, Workspace


def test_round_trip(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    s = Settings(sampler=SamplerSettings(temperature=0.3, seed=9), system_prompt="Be brief.")
    s = s.with_load_for("/m/a.gguf", LoadSettings(n_ctx=2048, context_policy="rolling"))
    s = (
        s.with_recent(str(tmp_path / "a.gguf"))
        .with_recent(str(tmp_path / "b.gguf"))
        .with_recent(str(tmp_path / "a.gguf"))
    )
    store.save(s)
    back = SettingsStore(tmp_path / "settings.json").load()
    assert back.sampler == s.sampler and back.model_load == s.model_load and back.system_prompt == "Be brief."
    assert back.load_for("/m/a.gguf") == LoadSettings(n_ctx=2048, context_policy="rolling")
    assert [p.rsplit("/", 1)[-1] for p in back.recent_models] == ["a.gguf", "b.gguf"]


def test_recent_list_is_capped(tmp_path):
    s = Settings()
    for i in range(MAX_RECENT + 5):
        s = s.with_recent(str(tmp_path / f"m{i}.gguf"))
    assert len(s.recent_models) == MAX_RECENT and s.recent_models[0].endswith(f"m{MAX_RECENT + 4}.gguf")


def test_damaged_file_is_set_aside(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{ this is not json")
    store = SettingsStore(path)
    s = store.load()
    assert s == Settings()
    assert store.notice and "damaged" in store.notice and str(path) in store.notice
    aside = list(tmp_path.glob("settings.json.damaged-*"))
    assert len(aside) == 1 and aside[0].read_text() == "{ this is not json"


def test_bad_values_fall_back_to_defaults(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "model_load": {"/m/a.gguf": {"n_ctx": "lots", "context_policy": "explode", "n_batch": 64}},
                "sampler": {"top_k": -5},
            }
        )
    )
    s = SettingsStore(path).load()
    a = s.load_for("/m/a.gguf")
    assert a.n_ctx == LoadSettings().n_ctx and a.context_policy == "stop" and a.n_batch == 64 and s.sampler.top_k == 0


def test_save_leaves_no_temp_files(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    for i in range(3):
        store.save(Settings(system_prompt=str(i)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def test_binary_garbage_is_set_aside_too(tmp_path):
    path = tmp_path / "settings.json"
    path.write_bytes(bytes(range(256)) * 4)
    store = SettingsStore(path)
    assert store.load() == Settings()
    assert store.notice and "not text" in store.notice
    assert len(list(tmp_path.glob("settings.json.damaged-*"))) == 1


def test_version_1_file_is_migrated_to_typed_fields(tmp_path):
    """Version 1 kept the library folders and the Hub token in an untyped ``extra`` dict."""
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "system_prompt": "Be brief.",
                "extra": {"library.folders": ["/models/a", "/models/a", 7, "/models/b"], "hub.token": " hf_abc "},
            }
        ),
        encoding="utf-8",
    )
    store = SettingsStore(path)
    s = store.load()
    assert store.notice is None
    assert s.system_prompt == "Be brief."
    assert s.library_folders == ("/models/a", "/models/b")
    assert s.hub_token == "hf_abc"
    store.save(s)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == SETTINGS_VERSION and "extra" not in data
    assert data["library_folders"] == ["/models/a", "/models/b"] and data["hub_token"] == "hf_abc"
    assert store.load() == s


def test_chat_template_overrides_are_kept_per_model_and_older_files_have_none(tmp_path):
    """Files written before overrides existed (version 2 without the field) read as none; bad entries are dropped."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 2, "system_prompt": "Be brief."}), encoding="utf-8")
    store = SettingsStore(path)
    s = store.load()
    assert store.notice is None and s.chat_templates == () and s.chat_template_for("/m/a.gguf") is None
    s = s.with_chat_template("/m/a.gguf", "{{ a }}").with_chat_template("/m/b.gguf", "{{ b }}")
    s = s.with_chat_template("/m/a.gguf", "{{ a2 }}")  # one per model: replaced
    assert s.chat_template_for("/m/a.gguf") == "{{ a2 }}" and s.chat_template_for("/m/b.gguf") == "{{ b }}"
    store.save(s)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["chat_templates"] == {"/m/b.gguf": "{{ b }}", "/m/a.gguf": "{{ a2 }}"}
    assert store.load() == s
    back = store.load().with_chat_template("/m/a.gguf", None)  # reset to the GGUF's
    assert back.chat_template_for("/m/a.gguf") is None and back.chat_template_for("/m/b.gguf") == "{{ b }}"
    data["chat_templates"] = {"/m/c.gguf": 7, "": "{{ x }}", "/m/d.gguf": "{{ d }}"}
    path.write_text(json.dumps(data), encoding="utf-8")
    assert store.load().chat_templates == (("/m/d.gguf", "{{ d }}"),)
    data["chat_templates"] = ["not", "an", "object"]
    path.write_text(json.dumps(data), encoding="utf-8")
    assert store.load().chat_templates == ()


def test_flash_attention_and_cache_types_persist_and_old_files_read_as_before(tmp_path):
    """Settings saved before flash attention and the cache types were settings ran with what
    llama-cpp-python's Llama() gives: flash attention off, f16 K and V."""
    path = tmp_path / "settings.json"
    old_file = {"version": 2, "load": {"n_ctx": 2048, "swa_full": False}, "recent_models": ["/m/a.gguf"]}
    path.write_text(json.dumps(old_file), encoding="utf-8")
    store = SettingsStore(path)
    old = store.load().load_for("/m/a.gguf")
    assert old.n_ctx == 2048 and not old.swa_full
    assert (old.flash_attn, old.type_k, old.type_v) == (FlashAttention.OFF, KVCacheType.F16, KVCacheType.F16)
    ls = LoadSettings(flash_attn=FlashAttention.AUTO, type_k="q8_0", type_v=KVCacheType.Q4_0)
    new = Settings().with_load_for("/m/a.gguf", ls)
    store.save(new)
    data = json.loads(path.read_text(encoding="utf-8"))["model_load"]["/m/a.gguf"]
    assert (data["flash_attn"], data["type_k"], data["type_v"]) == ("auto", "q8_0", "q4_0")
    back = SettingsStore(path).load().load_for("/m/a.gguf")
    assert back == ls and back.type_k is KVCacheType.Q8_0
    # Unknown values read as the defaults; a stored bool reads as on / off.
    odd_file = {"model_load": {"/m/a.gguf": {"flash_attn": True, "type_k": "q3_k", "type_v": 7}}}
    path.write_text(json.dumps(odd_file), encoding="utf-8")
    odd = SettingsStore(path).load().load_for("/m/a.gguf")
    assert (odd.flash_attn, odd.type_k, odd.type_v) == (FlashAttention.ON, KVCacheType.F16, KVCacheType.F16)


def test_a_quantized_v_cache_with_flash_attention_off_is_named_before_llama_cpp_refuses_it():
    assert LoadSettings().v_cache_conflict == ""
    assert LoadSettings(type_k="q8_0").v_cache_conflict == ""  # a quantized K cache works without it
    msg = LoadSettings(type_v="q8_0", flash_attn="off").v_cache_conflict
    assert "q8_0 V cache needs flash attention" in msg and "auto or on" in msg
    assert LoadSettings(type_v="q8_0", flash_attn="auto").v_cache_conflict == ""
    assert LoadSettings(type_v="q4_0", flash_attn="on").v_cache_conflict == ""


def test_each_workspace_keeps_its_dock_state_and_the_one_shown_round_trips():
    s = Settings().with_dock_state(Workspace.SAMPLING, "1366x768:AAA=").with_dock_state(Workspace.CHAT, "BBB=")
    s = replace(s, workspace=Workspace.SAMPLING)
    back = Settings.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s and back.dock_state(Workspace.SAMPLING) == "1366x768:AAA=" and back.window_state == "BBB="
    assert Settings.from_dict({"workspace": "nonsense"}).workspace is Workspace.CHAT  # older or damaged: chat


def test_load_settings_are_remembered_per_file_and_a_new_file_gets_glassboxs_defaults(tmp_path):
    """Model A's n_ctx 8192 and flash attention stay A's: B, never seen, loads with LoadSettings()."""
    a = LoadSettings(n_ctx=8192, flash_attn=FlashAttention.ON)
    s = Settings().with_load_for("/m/a.gguf", a)
    assert s.load_for("/m/a.gguf") == a and s.remembered_load("/m/a.gguf") == a
    assert s.load_for("/m/b.gguf") == LoadSettings() and s.remembered_load("/m/b.gguf") is None
    assert s.load_for(None) == LoadSettings()  # no model: the defaults
    b = LoadSettings(n_ctx=1024, type_k="q8_0")
    s = s.with_load_for("/m/b.gguf", b).with_load_for("/m/a.gguf", a)  # set again: one entry each
    assert dict(s.model_load) == {"/m/a.gguf": a, "/m/b.gguf": b} and len(s.model_load) == 2
    store = SettingsStore(tmp_path / "settings.json")
    store.save(s)
    assert store.load() == s and store.load().load_for("/m/b.gguf").type_k is KVCacheType.Q8_0
    # Reset: forgotten, and settings equal to the defaults are not "remembered" either.
    s = s.with_load_for("/m/a.gguf", None).with_load_for("/m/b.gguf", LoadSettings())
    assert s.model_load == () and s.load_for("/m/a.gguf") == LoadSettings()
    assert a.differences(LoadSettings()) == ("n_ctx 8192", "flash attention on")


def test_a_settings_file_from_before_keeps_its_models_loading_as_they_did(tmp_path):
    """Version 2 kept one ``load`` for every model: each recent model remembers it, a new one gets the defaults."""
    path = tmp_path / "settings.json"
    old = {"n_ctx": 16384, "n_threads": 1, "flash_attn": "auto", "context_policy": "rolling"}
    path.write_text(
        json.dumps({"version": 2, "load": old, "recent_models": ["/m/a.gguf", "/m/b.gguf"]}), encoding="utf-8"
    )
    s = SettingsStore(path).load()
    was = LoadSettings.from_dict(old)
    assert was.n_ctx == 16384 and was.context_policy is ContextPolicy.ROLLING
    assert s.load_for("/m/a.gguf") == was and s.load_for("/m/b.gguf") == was
    assert s.remembered_load("/m/new.gguf") is None and s.load_for("/m/new.gguf") == LoadSettings()
    SettingsStore(path).save(s)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == 3 and "load" not in data and set(data["model_load"]) == {"/m/a.gguf", "/m/b.gguf"}
    assert SettingsStore(path).load() == s  # read back as version 3: the same
    # An old file whose load was the defaults remembers nothing.
    path.write_text(json.dumps({"load": LoadSettings().to_dict(), "recent_models": ["/m/a.gguf"]}), encoding="utf-8")
    assert SettingsStore(path).load().model_load == ()
