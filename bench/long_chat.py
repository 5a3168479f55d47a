"""What a long conversation costs the window: opening it, scrolling it, its memory, switching.

Two conversations of ``--messages`` messages (default 500) are written with the real
conversation store into a temporary data folder: user and assistant alternate, the
assistant's replies a mix of prose paragraphs, fenced code blocks, lists, a table now
and then and LaTeX, 20-400 words each, with the stats a real reply is stored with. The
real window (every panel visible, ``--size`` 1366x768) opens on the fake engine of the
UI tests (``tests/support/fake_engine.py``: opening a chat needs no model). It reports:

* ``open_ms``: from the open-chat command (``MainWindow.open_conversation``, what a click
  in the chats list calls) until the view has painted the newest message scrolled to the
  bottom: the first Paint event the newest message's widget receives while the scroll
  bar stands at its maximum (the event loop runs freely meanwhile). ``open_call_ms``: the
  synchronous part (the command returning). Median (and all runs) of ``--opens`` opens
  of the same chat, each from an empty view (New chat).
* scrolling from the bottom to the top and back: a step every 10 ms (a wheel event of
  three notches to the viewport, then a PageUp/PageDown key to the view, alternating)
  until the top shows the conversation's first message, then until the bottom again;
  the UI thread's stalls (p50/p99/max ms): a 1 ms precise QTimer runs on the UI thread
  and each gap between its ticks beyond 1 ms is time the thread was busy (as
  bench/ui_stall.py and bench/stream_render.py measure). ``stall_cpu_ms_*``: the UI
  thread's own CPU time within each gap (``time.thread_time``): on a machine shared with
  other work a gap also holds the time other processes ran; this part does not.
* ``rss_mb``: the window process's resident memory after the chat is open (and its
  growth over the window before it opened, ``rss_open_delta_mb``) and after scrolling
  it whole (``rss_scrolled_mb``), from /proc/self/status.
* ``switch_ms``: opening the other 500-message chat while one is shown, until painted
  (as ``open_ms``), median and max of ``--switches`` switches back and forth.
* ``search_jump_ms``: a search hit in the chat's first message opened (the open-chat
  command with the message to show, as a click on the hit does, from an empty view) until
  that message is painted on screen.
* ``widgets_open`` / ``widgets_scrolled``: message widgets built after the open and
  after scrolling to the top.

Usage (a display is needed: xvfb-run, DISPLAY=:N, or QT_QPA_PLATFORM=offscreen)::

    python bench/long_chat.py [--messages 500] [--opens 5] [--switches 6] [--size 1366x768]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._window import loop_wait, pct, settle

_TEXT = (
    "the model reads each token of the prompt once and keeps its keys and values in the cache so that "
    "a later turn evaluates only what is new while the sampler picks the next token from the logits "
    "with temperature top p and a seed batch size decides how many tokens go through one forward pass "
    "memory grows with the context window and the quantization type sets how many bits each weight takes"
)
_WORDS = _TEXT.split()


def _prose(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(max(1, n_words))]
    out, sentence = [], []
    for w in words:
        sentence.append(w)
        if len(sentence) >= rng.randint(8, 18):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def _paragraphs(rng: random.Random, n_words: int) -> list[str]:
    parts, left = [], n_words
    while left > 0:
        n = min(left, rng.randint(30, 90))
        parts.append(_prose(rng, n))
        left -= n
    return parts


def _code(rng: random.Random, n_lines: int) -> str:
    lines = [f"def step_{rng.randint(1, 99)}(x: float, n: int = {rng.randint(1, 9)}) -> float:"]
    for i in range(n_lines):
        lines.append(f"    x = x * {rng.randint(2, 9)} + n  # {rng.choice(_WORDS)} {i}")
    lines.append("    return x")
    return "```python\n" + "\n".join(lines) + "\n```"


def _list(rng: random.Random, n_items: int) -> str:
    return "\n".join(
        ("  " if i % 3 == 2 else "") + f"- **{rng.choice(_WORDS)}** {_prose(rng, rng.randint(4, 12))}"
        for i in range(n_items)
    )


def _table(rng: random.Random, n_rows: int) -> str:
    rows = ["| n_batch | tokens | prefill (s) | tok/s |", "|---:|---:|---:|---:|"]
    for _ in range(n_rows):
        b, t = rng.choice((64, 128, 256, 512)), rng.randint(100, 4000)
        rows.append(f"| {b} | {t} | {t / 900:.2f} | {rng.uniform(20, 90):.1f} |")
    return "\n".join(rows)


def _latex(rng: random.Random) -> str:
    k = rng.randint(2, 9)
    return rng.choice(
        (
            f"The softmax is $p_i = \\frac{{e^{{z_i / T}}}}{{\\sum_j e^{{z_j / T}}}}$ with $T = 0.{k}$.",
            f"$$\\mathrm{{KV}} = 2 \\cdot n_{{layer}} \\cdot n_{{ctx}} \\cdot d \\cdot {k}$$",
            f"With \\(\\alpha = {k}\\) the cost is \\[ \\sum_{{t=1}}^{{n}} t^2 = \\frac{{n(n+1)(2n+1)}}{{6}} \\]",
        )
    )


def user_text(rng: random.Random, i: int) -> str:
    """A person's message: mostly short questions, now and then a long pasted paragraph (20-400 words)."""
    n = rng.randint(20, 60) if i % 10 else rng.randint(150, 400)
    return "\n\n".join(_paragraphs(rng, n))


def reply_text(rng: random.Random, i: int) -> str:
    """A reply of 20-400 words: prose, with a code block, a list, a table or LaTeX by turns."""
    n = rng.randint(20, 400)
    paras = _paragraphs(rng, n)
    blocks: list[str] = [paras[0]]
    if i % 5 == 1:
        blocks.append(_code(rng, rng.randint(4, 18)))
    if i % 4 == 3:
        blocks.append(_list(rng, rng.randint(3, 8)))
    if i % 50 == 25:
        blocks.append(_table(rng, rng.randint(4, 10)))
    if i % 7 == 2:
        blocks.append(_latex(rng))
    blocks.extend(paras[1:])
    return "\n\n".join(blocks)


def write_chat(store, n_messages: int, seed: int, title: str) -> tuple[int, list[int]]:
    """A stored conversation of ``n_messages`` alternating messages; its id and its message ids in order."""
    from app.core.chat.context import GenerationStats, Role, StopReason
    from app.core.conversations import MessageMeta

    rng = random.Random(seed)
    conv = store.create_conversation(system_prompt="You are a helpful assistant.", model_path="/models/Bench.gguf")
    store.rename(conv, title)
    parent: int | None = None
    ids = []
    for i in range(n_messages):
        if i % 2 == 0:
            parent = store.add_message(conv, parent, Role.USER, user_text(rng, i))
        else:
            text = reply_text(rng, i)
            stats = GenerationStats(
                prompt_tokens=40 * i,
                cached_tokens=38 * i,
                evaluated_tokens=2 * i + 30,
                prefill_s=0.2,
                ttft_s=0.25,
                generated_tokens=len(text.split()) * 4 // 3,
                decode_s=3.5,
                n_ctx=32768,
                context_used=45 * i,
                stop_reason=StopReason.EOS,
                seed=1234 + i,
            )
            meta = MessageMeta(model_path="/models/Bench.gguf", model_name="Bench", quant="Q4_1", stats=stats)
            parent = store.add_message(conv, parent, Role.ASSISTANT, text, meta)
        ids.append(parent)
    store.flush()
    return conv, ids


def rss_mb() -> float:
    """This process's resident memory, MB (VmRSS of /proc/self/status; 0 where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=500)
    ap.add_argument("--opens", type=int, default=5)
    ap.add_argument("--switches", type=int, default=6)
    ap.add_argument("--size", default="1366x768")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    os.environ.setdefault("GLASSBOX_HOME", tempfile.mkdtemp(prefix="glassbox-bench-"))

    from PySide6.QtCore import QElapsedTimer, QEvent, QObject, QPoint, QPointF, Qt, QTimer
    from PySide6.QtGui import QKeyEvent, QWheelEvent
    from PySide6.QtWidgets import QApplication

    from app.core.conversations import ConversationStore
    from app.paths import default_paths
    from app.ui.theme import apply_theme
    from app.ui.window.compose import create_window
    from tests.support.fake_engine import FakeEngine

    paths = default_paths().ensure()
    app = QApplication(sys.argv[:1])
    apply_theme(app)
    engine = FakeEngine()
    win = create_window(paths, engine=engine)
    win.resize(width, height)
    win.show()
    engine.start()
    loop_wait(lambda: engine.state.name in ("NO_MODEL", "READY"), 10)
    settle(0.5)
    rss_empty = rss_mb()
    store: ConversationStore = win.conversations
    conv_a, ids_a = write_chat(store, args.messages, 1, "Long chat A")
    conv_b, ids_b = write_chat(store, args.messages, 2, "Long chat B")
    win.chats_panel.refresh()
    view = win.chat_view
    bar = view.verticalScrollBar()

    class PaintWatch(QObject):
        """Notes when the watched widget is painted while ``shown()`` holds (default: the view
        stands at the bottom)."""

        def __init__(self, shown=lambda: bar.value() == bar.maximum()) -> None:
            super().__init__()
            self.at: float | None = None
            self.shown = shown

        def eventFilter(self, obj, ev) -> bool:  # noqa: N802
            if ev.type() == QEvent.Type.Paint and self.at is None and self.shown():
                self.at = time.perf_counter()
            return False

    def open_painted(conv: int, newest: int) -> tuple[float, float]:
        """ms until the open-chat command returned, ms until the newest message was painted at the bottom."""
        watch = PaintWatch()
        t0 = time.perf_counter()
        win.open_conversation(conv)
        t_call = time.perf_counter()
        w = view.widget_for(newest)
        assert w is not None and w is view.messages[-1], "the newest message is not the last widget"
        w.installEventFilter(watch)
        loop_wait(lambda: watch.at is not None, 30, check_ms=5)
        w.removeEventFilter(watch)
        return 1000 * (t_call - t0), 1000 * (watch.at - t0)

    # The probe: stall = gap between 1 ms ticks beyond 1 ms.
    clock = QElapsedTimer()
    clock.start()
    probe = QTimer()
    probe.setTimerType(Qt.TimerType.PreciseTimer)
    probe.setInterval(1)
    state: dict = {"last": 0, "cpu": 0.0, "gaps": None, "cpus": []}

    def tick() -> None:
        now, cpu = clock.nsecsElapsed(), time.thread_time()
        if state["gaps"] is not None and state["last"]:
            state["gaps"].append(max(0.0, (now - state["last"]) / 1e6 - 1.0))
            state["cpus"].append(1000 * (cpu - state["cpu"]))
        state["last"], state["cpu"] = now, cpu

    probe.timeout.connect(tick)
    probe.start()

    # ---- open: the same chat from an empty view, --opens times
    opens, calls = [], []
    for _ in range(args.opens):
        win.new_chat()
        settle(0.3)
        call, painted = open_painted(conv_a, ids_a[-1])
        calls.append(call)
        opens.append(painted)
        settle(0.3)
    rss_open = rss_mb()
    widgets_open = len(view.messages)

    # ---- scroll: up to the first message, then down to the bottom again
    def scroll(up: bool) -> tuple[list[float], int, float]:
        steps = {"n": 0}
        done = {"v": False}
        first_id = ids_a[0]

        def at_end() -> bool:
            if up:
                return bar.value() == 0 and bool(view.messages) and view.messages[0].message_id == first_id
            return bar.value() == bar.maximum()

        def step() -> None:
            if at_end() or steps["n"] > 20_000:
                done["v"] = True
                timer.stop()
                return
            steps["n"] += 1
            if steps["n"] % 2:
                vp = view.viewport()
                pos = QPointF(vp.width() / 2, vp.height() / 2)
                glob = QPointF(vp.mapToGlobal(QPoint(vp.width() // 2, vp.height() // 2)))
                delta = QPoint(0, 360 if up else -360)
                ev = QWheelEvent(
                    pos,
                    glob,
                    QPoint(0, 0),
                    delta,
                    Qt.MouseButton.NoButton,
                    Qt.KeyboardModifier.NoModifier,
                    Qt.ScrollPhase.NoScrollPhase,
                    False,
                )
                app.sendEvent(vp, ev)
            else:
                key = Qt.Key.Key_PageUp if up else Qt.Key.Key_PageDown
                app.sendEvent(view, QKeyEvent(QEvent.Type.KeyPress, key, Qt.KeyboardModifier.NoModifier))

        timer = QTimer()
        timer.setInterval(10)
        timer.timeout.connect(step)
        state["gaps"], state["cpus"], state["last"] = [], [], 0
        t0 = time.perf_counter()
        timer.start()
        loop_wait(lambda: done["v"], 600)
        settle(0.2)
        gaps, cpus = state["gaps"], state["cpus"]
        state["gaps"] = None
        return gaps, cpus, steps["n"], time.perf_counter() - t0

    up_gaps, up_cpus, up_steps, up_s = scroll(up=True)
    widgets_scrolled = len(view.messages)
    down_gaps, down_cpus, down_steps, down_s = scroll(up=False)
    rss_scrolled = rss_mb()

    # ---- switch between the two long chats
    switches = []
    for k in range(args.switches):
        conv, ids = (conv_b, ids_b) if k % 2 == 0 else (conv_a, ids_a)
        settle(0.3)
        switches.append(open_painted(conv, ids[-1])[1])

    # ---- search jump: a search hit in the chat's first message (as a click on the hit opens it)
    win.new_chat()
    settle(0.3)
    term = store.get_message(ids_a[0]).content.split()[0].strip(".").lower()
    win.chats_panel.search.setText(term)
    settle(0.5)
    t0 = time.perf_counter()
    win.open_conversation(conv_a, focus_message=ids_a[0])
    oldest = view.widget_for(ids_a[0])

    def oldest_on_screen() -> bool:
        top = oldest.mapTo(view.widget(), QPoint(0, 0)).y()
        return top < bar.value() + view.viewport().height() and top + oldest.height() > bar.value()

    watch = PaintWatch(oldest_on_screen)
    oldest.installEventFilter(watch)
    loop_wait(lambda: watch.at is not None, 60, check_ms=5)
    jump_ms = 1000 * (watch.at - t0)
    probe.stop()
    win.close()
    win.conversations.close()
    engine.shutdown()

    def stalls(g: list[float], c: list[float]) -> dict:
        return {
            "samples": len(g),
            "stall_ms_p50": round(pct(g, 50), 2),
            "stall_ms_p99": round(pct(g, 99), 2),
            "stall_ms_max": round(max(g), 2) if g else 0.0,
            "stall_cpu_ms_p99": round(pct(c, 99), 2),
            "stall_cpu_ms_max": round(max(c), 2) if c else 0.0,
        }

    out = {
        "platform": app.platformName(),
        "messages": args.messages,
        "size": args.size,
        "open_ms": round(statistics.median(opens), 1),
        "open_ms_runs": [round(v, 1) for v in opens],
        "open_call_ms": round(statistics.median(calls), 1),
        "widgets_open": widgets_open,
        "rss_mb": round(rss_open, 1),
        "rss_open_delta_mb": round(rss_open - rss_empty, 1),
        "scroll_up": {**stalls(up_gaps, up_cpus), "steps": up_steps, "s": round(up_s, 2)},
        "scroll_down": {**stalls(down_gaps, down_cpus), "steps": down_steps, "s": round(down_s, 2)},
        "scroll": stalls(up_gaps + down_gaps, up_cpus + down_cpus),
        "widgets_scrolled": widgets_scrolled,
        "rss_scrolled_mb": round(rss_scrolled, 1),
        "switch_ms": round(statistics.median(switches), 1) if switches else 0.0,
        "switch_ms_max": round(max(switches), 1) if switches else 0.0,
        "search_jump_ms": round(jump_ms, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
