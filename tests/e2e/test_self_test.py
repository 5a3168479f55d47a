"""``glassbox --self-test`` as a person (or CI, on a bundle) runs it: a separate process, JSON on stdout.

The self-test starts the window offscreen, the engine process, hands the model over through a
second start (single instance), generates a few tokens and checks the TTFT and KV cache figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _self_test(*args: str, env_extra: dict[str, str] | None = None) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    r = subprocess.run(
        [sys.executable, "-m", "app", "--self-test", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return r.returncode, json.loads(r.stdout)


def test_self_test_chats_through_the_handed_over_model_and_reports_the_figures(smollm2, tmp_path):
    code, report = _self_test("--model", str(smollm2), env_extra={"GLASSBOX_HOME": str(tmp_path / "home")})
    assert code == 0, report
    assert report["ok"] is True and report["model"] == str(smollm2.resolve())
    assert report["engine_process_name"] == "glassbox-engine"
    assert report["generated_tokens"] > 0 and report["ttft_s"] > 0 and report["decode_tok_s"] > 0
    assert 0 < report["kv_used_bytes"] <= report["kv_allocated_bytes"]
    assert report["stats_panel"]["ttft"].endswith("ms") and "allocated" in report["stats_panel"]["kv"]
    # The self-test works in a temporary data folder: the person's own (here GLASSBOX_HOME) is untouched.
    assert not (tmp_path / "home").exists()


def test_self_test_takes_the_test_model_variable_when_no_model_is_named(smollm2, tmp_path):
    code, report = _self_test(env_extra={"GLASSBOX_TEST_SMOLLM2": str(smollm2), "GLASSBOX_HOME": str(tmp_path)})
    assert code == 0, report
    assert report["model"] == str(smollm2.resolve())


def test_self_test_fails_with_a_reason_when_the_model_is_missing(tmp_path):
    code, report = _self_test("--model", str(tmp_path / "nope.gguf"))
    assert code == 1
    assert report == {"ok": False, "failed": "model", "reason": report["reason"], "seconds": report["seconds"]}
    assert "nope.gguf" in report["reason"] and "does not exist" in report["reason"]


def test_self_test_without_any_model_says_how_to_name_one(tmp_path):
    env = {"GLASSBOX_TEST_SMOLLM2": "", "GLASSBOX_HOME": str(tmp_path)}
    code, report = _self_test(env_extra=env)
    assert code == 1 and report["failed"] == "model"
    assert "--model" in report["reason"] and "GLASSBOX_TEST_SMOLLM2" in report["reason"]


def test_self_test_fails_at_the_model_step_with_the_windows_check_for_a_text_file_or_a_folder(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello, this is not a model\n")
    code, report = _self_test("--model", str(text), env_extra={"GLASSBOX_HOME": str(tmp_path / "home")})
    assert code == 1
    assert report == {"ok": False, "failed": "model", "reason": report["reason"], "seconds": report["seconds"]}
    assert (
        "notes.gguf" in report["reason"] and "not a GGUF model" in report["reason"] and "text file" in report["reason"]
    )
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    code, report = _self_test("--model", str(folder), env_extra={"GLASSBOX_HOME": str(tmp_path / "home")})
    assert code == 1 and report["failed"] == "model" and "folder" in report["reason"]
    assert "does not exist" not in report["reason"]
