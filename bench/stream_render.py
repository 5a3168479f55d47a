"""What a streaming reply costs the window, per kind of Markdown block.

The real window (every panel visible, 1366x768) streams a reply of ``--tokens``
tokens (default 5,000) of each kind: one growing table, one fenced code block, a
nested list, LaTeX-heavy prose. Two engines:

* ``--engine fake`` (default): the tokens come from the fake engine of the UI
  tests (``tests/support/fake_engine.py``: the same protocol events and client
  signals as the real engine, no model) at ``--rate`` tokens per second, in the
  window's process, so every kind streams the same text at the same pace before
  and after a change.
* ``--engine real``: the real engine process with a real model (``--model``,
  default ``GLASSBOX_TEST_SMOLLM2``), n_ctx 8192. No small model writes a
  5,000-token table, so the text is forced through ``GLASSBOX_FORCED_REPLY``
  (:mod:`app.engine.forced`, a benchmark facility): real are the prefill, the
  sampler chain on the real logits each step, detokenization, stop checks, the
  batching to the window and one ``llama_decode`` per token; forced is which token
  is kept (the next token of the kind's text, tokenized by the model). The reply
  ends at ``max_tokens`` = ``--tokens``. In the same run, the same request (the
  window's own Generate, re-sent) goes to a second engine process with the same
  model and load settings and no window: ``decode_ratio`` is decode tok/s with
  the window / without (the engine's own figure: (generated - 1) / decode time).

Per kind it reports:

* the UI thread's stalls, ms (p50/p95/p99/max): a 1 ms precise QTimer runs on
  the UI thread; each gap between its ticks beyond 1 ms is time the thread was
  busy (as bench/ui_stall.py measures);
* the window process's CPU use, % of one core, while the reply streams (fake:
  the scripted engine host is in the same process, one tick of its thread per token; real:
  the engine is another process and is not counted);
* Esc to ``generation_finished``, ms: a second stream of the same text is
  stopped with Esc at 25 %, 50 % and 90 % of it, the focus on the chat view (not
  the composer), the key sent through QTest so the window's shortcut handles it
  as a real key press. ``esc_settled_ms``: until the window has handled the end
  (saved the reply, drawn it whole, the composer offers Send again).

Usage (a display is needed: xvfb-run, or QT_QPA_PLATFORM=offscreen)::

    python bench/stream_render.py [--engine fake|real] [--model M.gguf] [--tokens 5000] [--rate 100]
                                  [--kinds table,code,list,latex]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._window import loop_wait, pct, settle

KINDS = ("table", "code", "list", "latex")
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "vector",
    "matrix",
    "tensor",
    "cache",
    "batch",
]


def _word(i: int) -> str:
    return _WORDS[(i * 7 + 3) % len(_WORDS)]


def table_doc(n_rows: int) -> str:
    head = "Here is the table you asked for.\n\n| # | Name | Value (ms) | Ratio | Note |\n|---:|---|---:|---:|---|\n"
    rows = [
        f"| {i} | {_word(i)} {_word(i + 1)} | {i * 37 % 1000}.{i % 10} | 0.{i * 13 % 100:02d} | `{_word(i + 2)}` |"
        for i in range(1, n_rows + 1)
    ]
    return head + "\n".join(rows) + "\n"


def code_doc(n_lines: int) -> str:
    body = []
    for i in range(n_lines):
        k = i % 6
        if k == 0:
            body.append(f"def step_{i}(x: float, y: int = {i}) -> float:")
        elif k == 1:
            body.append(f'    """Compute {_word(i)} for the {_word(i + 1)} case."""')
        elif k == 2:
            body.append(f"    total = x * {i % 17} + y  # {_word(i)}")
        elif k == 3:
            body.append(f"    if total > {i}:\n        return total / {i % 5 + 1}")
        elif k == 4:
            body.append(f'    values = [v ** 2 for v in range({i % 9})]  # "{_word(i)}"')
        else:
            body.append("    return sum(values) + total\n")
    return "Here is the code:\n\n```python\n" + "\n".join(body) + "\n```\n"


def list_doc(n_items: int) -> str:
    out = ["The plan, step by step:", ""]
    for i in range(1, n_items + 1):
        depth = (0, 1, 2, 1)[i % 4]
        out.append("  " * depth + f"- **{_word(i)}** {_word(i + 1)} {_word(i + 2)} and `{_word(i + 3)}` ({i})")
    return "\n".join(out) + "\n"


def latex_doc(n_paragraphs: int) -> str:
    out = []
    for i in range(n_paragraphs):
        k = i % 4
        if k == 0:
            out.append(
                f"The {_word(i)} term is $x_{{{i}}}^2 + \\alpha_{i} y$ and with \\(\\beta = {i % 7}\\) the sum "
                f"$\\sum_{{k=1}}^{{{i + 2}}} k^2$ stays small; it costs $5 and $10 to try."
            )
        elif k == 1:
            out.append(f"$$\\int_0^{{{i}}} e^{{-t^2}}\\,dt = \\frac{{\\sqrt{{\\pi}}}}{{2}}\\operatorname{{erf}}({i})$$")
        elif k == 2:
            out.append(
                f"For the {_word(i)} case, \\[ \\mathbf{{A}}_{{{i}}} = \\begin{{pmatrix}} 1 & {i} \\\\ 0 & 1 \\end{{pmatrix}} \\]"
            )
        else:
            out.append(f"So $\\frac{{a+{i}}}{{b}} \\le \\sqrt{{{i}}}$ holds when $a \\ne b$, as the {_word(i)} shows.")
    return "\n\n".join(out) + "\n"


def tokens_of(text: str) -> list[str]:
    """Cut text into token-sized pieces (1-4 visible characters, with the spaces before them)."""
    pieces = re.findall(r"[ \t]*(?:\S{1,4}|\n)|[ \t]+$", text)
    assert "".join(pieces) == text
    return pieces


def document(kind: str, n_tokens: int) -> list[str]:
    """About ``n_tokens`` pieces of a document of ``kind`` (grown until it is long enough)."""
    make = {"table": table_doc, "code": code_doc, "list": list_doc, "latex": latex_doc}[kind]
    n = 8
    while True:
        pieces = tokens_of(make(n))
        if len(pieces) >= n_tokens:
            return pieces[:n_tokens]
        n = int(n * 1.5) + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=5000)
    ap.add_argument("--engine", choices=("fake", "real"), default="fake", help="scripted fake engine, or the real one")
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2", ""), help="GGUF for --engine real")
    ap.add_argument("--rate", type=float, default=100.0, help="tokens per second the scripted engine streams (fake)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--no-esc", action="store_true", help="skip the Esc latency runs")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    real = args.engine == "real"
    if real and not args.model:
        ap.error("--engine real needs --model (or GLASSBOX_TEST_SMOLLM2)")
    os.environ.setdefault("GLASSBOX_HOME", tempfile.mkdtemp(prefix="glassbox-bench-"))
    forced_file = Path(tempfile.mkdtemp(prefix="glassbox-bench-forced-")) / "reply.md"
    if real:
        from app.engine.forced import ENV

        forced_file.write_text("", encoding="utf-8")
        os.environ[ENV] = str(forced_file)  # inherited by both engine processes (spawned after this)

    from PySide6.QtCore import QElapsedTimer, Qt, QTimer
    from PySide6.QtWidgets import QApplication

    from app.core import protocol as P
    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window
    from app.ui.window.model_loader import model_key

    paths = default_paths().ensure()
    app = QApplication(sys.argv[:1])
    apply_theme(app)
    if real:
        engine = None
        model = args.model
        n_ctx = 8192
    else:
        from tests.support.fake_engine import FakeEngine, reply
        from tests.support.models import llama_metadata, llama_tensors, write_gguf

        engine = FakeEngine()
        model = str(
            write_gguf(
                Path(tempfile.mkdtemp(prefix="glassbox-bench-model-")) / "Bench-Q4_1.gguf",
                llama_metadata(
                    name="Bench",
                    file_type=3,
                    extra={"tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"},
                ),
                llama_tensors(qtype="Q4_1"),
            )
        )
        n_ctx = max(32768, 4 * args.tokens)
    if engine is None:
        from app.ui.engine.client import EngineClient

        engine = EngineClient(str(paths.logs_dir / "engine.log"))  # as create_window makes it
    finished: list[tuple[float, object]] = []  # (when, event): connected before the window's slots
    engine.generation_finished.connect(lambda ev: finished.append((time.perf_counter(), ev)))
    sent: list[object] = []
    engine.request_sent.connect(lambda req: sent.append(req) if isinstance(req, P.Generate) else None)
    win = create_window(paths, engine=engine)
    win.resize(1366, 768)
    win.show()
    engine.start()
    load = replace(win.settings.load_for(model_key(model)), n_ctx=n_ctx)
    win.settings_ctl.apply(lambda s: s.with_load_for(model_key(model), load))  # remembered for this file
    loop_wait(lambda: engine.state.name in ("NO_MODEL", "READY"), 60)
    win.load_model(model)
    loop_wait(lambda: engine.model is not None, 120)
    panel = win.sampler_panel
    panel.set_settings(replace(panel.settings(), max_tokens=args.tokens + (0 if real else 10)), emit=True)
    if not real:
        engine.book.tick_s = 1 / args.rate  # the scripted engine's main loop: one token per tick
    headless = Headless(model, load) if real else None

    clock = QElapsedTimer()
    clock.start()
    probe = QTimer()
    probe.setTimerType(Qt.TimerType.PreciseTimer)
    probe.setInterval(1)
    state: dict = {"last": 0, "gaps": None}

    def tick() -> None:
        now = clock.nsecsElapsed()
        if state["gaps"] is not None and state["last"]:
            state["gaps"].append(max(0.0, (now - state["last"]) / 1e6 - 1.0))
        state["last"] = now

    probe.timeout.connect(tick)
    probe.start()

    results: dict[str, dict] = {}
    for kind in kinds:
        if real:
            # twice the pieces: the model's tokens are longer than the pieces; max_tokens ends the reply
            pieces = document(kind, 2 * args.tokens)
            forced_file.write_text("".join(pieces), encoding="utf-8")
        else:
            pieces = document(kind, args.tokens)
            engine.script(reply(*pieces))
        win.new_chat()
        finished.clear()
        sent.clear()
        state["gaps"], state["last"] = [], 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        win.chat.send(f"Write a long {kind}.")
        loop_wait(lambda: bool(finished), 3600)
        text = finished[0][1].text
        loop_wait(lambda t=text: win.chat_view.messages[-1].text == t and not engine.generating, 60)
        settle(0.3)  # the last repaint (the repaint clock runs at 30 Hz)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        gaps = state["gaps"]
        state["gaps"] = None
        stats = finished[0][1].stats
        row = {
            "tokens": stats.generated_tokens if real else len(pieces),
            "stream_s": round(wall, 2),
            "stall_ms_p50": round(pct(gaps, 50), 2),
            "stall_ms_p95": round(pct(gaps, 95), 2),
            "stall_ms_p99": round(pct(gaps, 99), 2),
            "stall_ms_max": round(max(gaps), 2),
            "window_cpu_percent": round(100 * cpu / wall, 1),
        }
        if headless is not None:
            req = sent[0]
            alone = headless.decode_tok_s(req)  # the same request, the same forced tokens, no window
            row["decode_tok_s_window"] = round(stats.decode_tok_s, 1)
            row["decode_tok_s_headless"] = round(alone, 1)
            row["decode_ratio"] = round(stats.decode_tok_s / alone, 3) if alone else 0.0
        if not args.no_esc:
            to_signal, to_settled = esc_latencies(app, win, engine, pieces, finished, real)
            row["esc_ms"] = to_signal
            row["esc_ms_max"] = max(to_signal)
            row["esc_settled_ms"] = to_settled
            row["esc_settled_ms_max"] = max(to_settled)
        results[kind] = row
        print(kind, json.dumps(row), flush=True)
    probe.stop()
    win.close()
    win.conversations.close()
    engine.shutdown()
    if headless is not None:
        headless.close()
    out = {
        "engine": args.engine,
        "model": Path(model).name if real else None,
        "rate_tok_s": None if real else args.rate,
        "platform": app.platformName(),
        "kinds": results,
    }
    print(json.dumps(out))
    return 0


class Headless:
    """The same engine (a second engine process, the same model and load settings) with no window.

    Args:
        model: the GGUF path.
        load: the load settings the window used.
    """

    def __init__(self, model: str, load) -> None:
        from app.core import protocol as P
        from app.engine.host import EngineHost

        self.P = P
        self.host = EngineHost()
        self.host.start()
        ready = self.host.recv(60)
        assert isinstance(ready, P.EngineReady), ready
        loaded = self.host.request(P.LoadModel(self.host.next_id(), model, load))
        assert isinstance(loaded, P.ModelLoaded), loaded

    def decode_tok_s(self, req) -> float:
        """Decode tok/s (the engine's own figure, as the window's) of ``req`` re-sent with a fresh id.

        Raises:
            RuntimeError: the turn failed.
        """
        self.host.clear_cancel()
        ev = self.host.request(replace(req, request_id=self.host.next_id()), timeout=3600)
        if not isinstance(ev, self.P.Finished):
            raise RuntimeError(f"the headless turn failed: {ev}")
        return float(ev.stats.decode_tok_s)

    def close(self) -> None:
        self.host.stop()


def esc_latencies(app, win, engine, pieces, finished, real: bool) -> tuple[list[float], list[float]]:
    """Esc at 25/50/90 % of the stream, with the focus on the chat view (not the composer): ms to
    generation_finished, and ms until the window has handled it (the composer offers Send again).
    The key goes through QTest, so the window's Esc shortcut sees it as it would a real key."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    n = len(pieces) if not real else win.sampler_panel.settings().max_tokens
    out, settled = [], []
    for frac in (0.25, 0.5, 0.9):
        win.new_chat()
        if not real:
            from tests.support.fake_engine import reply

            engine.script(reply(*pieces))
        finished.clear()
        seen: list[int] = [0]
        count = lambda _ev, s=seen: s.__setitem__(0, s[0] + 1)  # noqa: E731
        engine.token_received.connect(count)
        win.chat.send("again")
        loop_wait(lambda f=frac, s=seen: s[0] >= f * n, 3600)
        win.activateWindow()
        loop_wait(lambda: app.activeWindow() is win, 10, check_ms=2)
        target = win.chat_view  # not the composer: Esc must stop the reply from anywhere
        target.setFocus()
        loop_wait(lambda t=target: app.focusWidget() is t, 10, check_ms=2)
        t0 = time.perf_counter()
        QTest.keyClick(target, Qt.Key.Key_Escape)
        loop_wait(lambda: bool(finished), 60, check_ms=2)
        loop_wait(lambda: win.composer.button.text() == "Send", 60, check_ms=2)
        out.append(round(1000 * (finished[0][0] - t0), 1))
        settled.append(round(1000 * (time.perf_counter() - t0), 1))
        engine.token_received.disconnect(count)  # only this slot: a bare disconnect() drops the window's too
        loop_wait(lambda: not engine.generating, 10)
    return out, settled


if __name__ == "__main__":
    raise SystemExit(main())
