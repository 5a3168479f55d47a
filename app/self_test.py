"""``glassbox --self-test``: start the whole app headless, chat a few tokens, print JSON, exit 0 or 1.

What a person (or CI, or a packager checking a bundle) runs to know that this
Glassbox works on this machine, with no window on screen and no click:

1. The window is built as :func:`app.main.main` builds it, on the ``offscreen``
   Qt platform, with a fresh temporary data folder (``GLASSBOX_HOME``), so the
   person's chats, settings and a running Glassbox are never touched.
2. It claims the single-instance guard of that folder and starts the engine
   process; the engine's process name is read back (``glassbox-engine``).
3. A second Glassbox process is started with the model file as its argument, as
   a file manager (``xdg-open``, the ``.desktop`` file's ``%f``) starts it; it
   must hand the file to this window through :mod:`app.ui.window.single_instance` and
   exit 0, and the window must load that file.
4. A short reply (:data:`REPLY_TOKENS` tokens at most) is generated through the
   composer; the reply's TTFT and KV cache figures must be present, in the
   Finished event and in the Stats panel.

The report is one JSON object on stdout: ``ok`` (bool), ``failed`` (the step
that failed, with ``reason``) or the figures (``ttft_s``, ``decode_tok_s``,
``kv_used_bytes``, ``kv_allocated_bytes``, ``engine_process_name`` ...).
Exit code 0 when every step passed, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

#: Environment variable the test suite uses for the starter-size model (SmolLM2-135M-Instruct).
from app.cli import TEST_MODEL_ENV

REPLY_TOKENS = 8
PROMPT = "Say hello in one short sentence."
ENGINE_START_S = 120.0  # spawn + import llama_cpp: seconds on a slow, busy machine
MODEL_LOAD_S = 180.0
REPLY_S = 180.0
HAND_OVER_S = 60.0
ENGINE_PROCESS_NAME = "glassbox-engine"


class SelfTestFailed(Exception):
    """A step of the self-test failed; ``step`` names it, the message says why."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(reason)
        self.step = step
        self.reason = reason


def default_model(environ: dict[str, str] | os._Environ[str] | None = None) -> Path | None:
    """The model the self-test loads without ``--model``: ``$GLASSBOX_TEST_SMOLLM2`` when it names a
    file, else the first loadable model of the person's library (most recently used first), else None."""
    env = os.environ if environ is None else environ
    named = env.get(TEST_MODEL_ENV)
    if named and Path(named).is_file():
        return Path(named)
    from app.core.models.library import ModelLibrary
    from app.paths import default_paths

    paths = default_paths(env)
    if not paths.models_dir.is_dir():
        return None
    entries = [e for e in ModelLibrary(paths).scan() if e.ok]
    return entries[0].path if entries else None


def second_start(model: Path) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a second start that opens ``model``: the bundle's
    executable when frozen, else this Python on this copy of ``app`` (first on PYTHONPATH)."""
    env = dict(os.environ)
    if getattr(sys, "frozen", False):
        return [sys.executable, str(model)], env
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", "app", str(model)], env


def process_name(pid: int) -> str:
    """The name the kernel shows for ``pid`` (``/proc/<pid>/comm``, Linux), else ``ps``'s; "" if unknown."""
    comm = Path(f"/proc/{pid}/comm")
    try:
        return comm.read_text(encoding="utf-8").strip()
    except OSError:
        pass
    try:
        r = subprocess.run(["ps", "-o", "comm=", "-p", str(pid)], capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return r.stdout.strip()


def _wait(app: Any, done: Callable[[], bool], timeout_s: float, step: str, what: str) -> None:
    """Run Qt's event loop until ``done()`` or ``timeout_s`` seconds; raises SelfTestFailed on timeout."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise SelfTestFailed(step, f"{what} did not happen within {timeout_s:.0f} s")
        app.processEvents()
        time.sleep(0.01)


def run(model: Path | None) -> int:
    """Run the self-test (see the module docstring); prints the JSON report. Returns the exit code."""
    t0 = time.monotonic()
    report: dict[str, Any] = {"ok": False}
    home = Path(tempfile.mkdtemp(prefix="glassbox-self-test-"))
    try:
        report.update(_run(model, home))
        report["ok"] = True
    except SelfTestFailed as exc:
        report.update(failed=exc.step, reason=exc.reason)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    report["seconds"] = round(time.monotonic() - t0, 2)
    print(json.dumps(report, indent=2), flush=True)
    return 0 if report["ok"] else 1


def _run(model: Path | None, home: Path) -> dict[str, Any]:
    if model is None:
        model = default_model()
    if model is None:
        raise SelfTestFailed(
            "model",
            f"no model to load: pass --model PATH (a .gguf file), set {TEST_MODEL_ENV}, "
            "or put a model in Glassbox's library",
        )
    model = model.resolve()
    if not model.exists():
        raise SelfTestFailed("model", f"the model file {model} does not exist")
    # The window's own check before a load: a text file, a truncated download or a folder fails
    # here with what is wrong, not later as an engine error or a timeout.
    from app.core.gguf.gguf_info import GGUFError, check_loadable

    try:
        check_loadable(model)
    except GGUFError as exc:
        raise SelfTestFailed("model", str(exc)) from exc
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    os.environ["GLASSBOX_HOME"] = str(home)

    from PySide6.QtWidgets import QApplication

    from app import APP_ID, logfiles
    from app.core import protocol as P
    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window, listen_for_second_starts
    from app.ui.window.single_instance import SingleInstance

    paths = default_paths().ensure()
    logfiles.configure(paths.logs_dir / "app.log", debug=False, stderr=False)
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setDesktopFileName(APP_ID)
    apply_theme(app)
    instance = SingleInstance(paths.data_dir)
    if not instance.claim() or not instance.listening:
        raise SelfTestFailed("single-instance", f"could not become the running instance of {paths.data_dir}")
    window = create_window(paths)
    engine = window.engine
    loads: list[str] = []
    finished: list[P.Finished] = []
    failed: list[str] = []
    engine.request_sent.connect(lambda req: loads.append(req.path) if isinstance(req, P.LoadModel) else None)
    engine.generation_finished.connect(finished.append)
    engine.generation_failed.connect(lambda ev: failed.append(ev.message))
    engine.model_load_failed.connect(lambda ev: failed.append(ev.message))
    engine.engine_crashed.connect(failed.append)
    out: dict[str, Any] = {"model": str(model), "frozen": bool(getattr(sys, "frozen", False))}
    try:
        t = time.monotonic()
        engine.start()
        window.show()
        listen_for_second_starts(instance, window)
        _wait(app, lambda: engine.ready_info is not None or bool(failed), ENGINE_START_S, "engine", "engine start")
        if failed:
            raise SelfTestFailed("engine", failed[0])
        out["engine_start_s"] = round(time.monotonic() - t, 2)
        ready = engine.ready_info
        assert ready is not None  # the wait above returned on it
        out["llama_cpp_version"] = ready.llama_cpp_version
        out["system_info"] = ready.system_info
        pid = engine.pid
        out["engine_process_name"] = process_name(pid) if pid else ""
        if sys.platform.startswith("linux") and out["engine_process_name"] != ENGINE_PROCESS_NAME[:15]:
            raise SelfTestFailed(
                "engine",
                f"the engine process is named {out['engine_process_name']!r}, not {ENGINE_PROCESS_NAME!r}",
            )

        # The model arrives the way a file manager sends it: a second start, handed over.
        t = time.monotonic()
        cmd, env = second_start(model)
        second = subprocess.Popen(cmd, cwd=str(model.parent), env=env)
        try:
            _wait(app, lambda: second.poll() is not None, HAND_OVER_S, "hand-over", "the second start's exit")
        finally:
            if second.poll() is None:
                second.kill()
                second.wait()
        if second.returncode != 0:
            raise SelfTestFailed("hand-over", f"the second start exited with code {second.returncode}")
        if str(model) not in loads:
            raise SelfTestFailed("hand-over", f"the window did not load the handed-over file (loads: {loads})")
        out["hand_over_s"] = round(time.monotonic() - t, 2)
        _wait(app, lambda: engine.model is not None or bool(failed), MODEL_LOAD_S, "load", "the model load")
        if failed:
            raise SelfTestFailed("load", failed[0])
        loaded = engine.model
        assert loaded is not None  # the wait above returned on it
        out["load_s"] = round(loaded.load_s, 3)
        out["n_ctx"] = loaded.n_ctx

        panel = window.sampler_panel
        panel.set_settings(replace(panel.settings(), max_tokens=REPLY_TOKENS, temperature=0.0), emit=True)
        window.composer.box.setPlainText(PROMPT)
        window.composer.button.click()
        _wait(app, lambda: bool(finished) or bool(failed), REPLY_S, "reply", "the reply")
        if failed:
            raise SelfTestFailed("reply", failed[0])
        stats = finished[0].stats
        out.update(
            reply=finished[0].text,
            generated_tokens=stats.generated_tokens,
            ttft_s=round(stats.ttft_s, 4),
            decode_tok_s=round(stats.decode_tok_s, 2),
            kv_used_bytes=stats.kv_used_bytes,
            kv_allocated_bytes=stats.kv_allocated_bytes,
        )
        if not (stats.generated_tokens > 0 and stats.ttft_s > 0 and stats.decode_tok_s > 0):
            raise SelfTestFailed("reply", f"no tokens or no timing: {stats}")
        if not (0 < stats.kv_used_bytes <= stats.kv_allocated_bytes):
            raise SelfTestFailed("reply", f"the KV cache figures are missing: {stats}")

        # What the person sees: the Stats panel's TTFT tile and KV cache line (drawn on the repaint clock).
        tiles = window.stats_panel
        _wait(
            app,
            lambda: tiles.tiles["ttft"][0].text().endswith("ms") and "allocated" in tiles.kv_label.text(),
            10.0,
            "stats",
            "TTFT and KV cache figures in the Stats panel",
        )
        out["stats_panel"] = {"ttft": tiles.tiles["ttft"][0].text(), "kv": tiles.kv_label.text()}
    finally:
        window.close()
        engine.shutdown()
        window.conversations.close()
        instance.release()
    return out
