"""The composer's token count (app/ui/chat/draft_counter.py) on the FakeEngine: counted while typing,
after a reply in flight, with the chat before the draft; what it says over n_ctx under each policy."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core import protocol as P
from app.core.chat.context import ContextPolicy, Role
from app.ui.chat.draft_counter import WAITING, count_text
from app.ui.common.severity import Severity
from tests.support.fake_engine import reply
from tests.support.window import send


def _counted(window):
    return window.draft_counter.last


def _debounce_over(qtbot, window) -> None:
    """Wait until the counter's debounce is not running: what it does when it ends (ask, or clear) is done."""
    qtbot.waitUntil(lambda: not window.draft_counter._timer.isActive(), timeout=3000)


def test_the_draft_is_counted_while_typing_with_what_send_would_evaluate(qtbot, window):
    box = window.composer.box
    qtbot.keyClicks(box, "hello there world")
    qtbot.waitUntil(lambda: _counted(window) is not None and _counted(window).last_tokens == 3, timeout=3000)
    sent = window.engine.sent(P.CountPrompt)
    # Debounced: one request for the 17 keystrokes, not one per key.
    assert len(sent) == 1
    req = sent[-1]
    assert req.messages[-1].role is Role.USER and req.messages[-1].content == "hello there world"
    text = window.composer.count.text()
    n = _counted(window)
    assert text == f"3 tokens · prompt {n.n_tokens:,} of n_ctx {n.n_ctx:,} · {n.n_ctx - n.n_tokens:,} left"
    assert window.composer.count.toolTip().startswith(text + "\n\n")  # the line whole, then what it means
    assert n.n_tokens > 3  # the template's framing around the draft
    # A setting the count does not depend on (a sampler slider) asks nothing again.
    from dataclasses import replace

    sampler = window.settings_ctl.settings.sampler
    window.settings_ctl.update(sampler=replace(sampler, temperature=sampler.temperature + 0.1))
    _debounce_over(qtbot, window)  # a recount would have started the debounce, and asked when it ended
    assert len(window.engine.sent(P.CountPrompt)) == 1
    # Emptied: no count shown.
    box.clear()
    qtbot.waitUntil(lambda: window.composer.count.text() == "", timeout=3000)
    assert _counted(window) is None


def test_typing_during_a_reply_is_counted_after_it_with_the_chat_before_the_draft(qtbot, window):
    send(qtbot, window, "first question")
    pieces = [f" w{i}" for i in range(40)]  # under max_tokens (48 here)
    window.engine.script(reply(*pieces))
    box = window.composer.box
    qtbot.keyClicks(box, "second")
    qtbot.keyClick(box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.engine.generating, timeout=3000)
    window.engine.pause()
    n_before = len(window.engine.sent(P.CountPrompt))
    qtbot.keyClicks(box, "a follow up")
    # Past the debounce the counter says when it will count, and asks nothing while the reply streams.
    qtbot.waitUntil(lambda: window.composer.count.text() == WAITING, timeout=3000)
    assert window.engine.generating
    assert len(window.engine.sent(P.CountPrompt)) == n_before
    assert window.composer.count.text() == WAITING  # says when it will count
    window.engine.resume()
    qtbot.waitUntil(lambda: not window.engine.generating, timeout=5000)
    qtbot.waitUntil(lambda: _counted(window) is not None and _counted(window).last_tokens == 3, timeout=3000)
    req = window.engine.sent(P.CountPrompt)[-1]
    # The chat so far comes before the draft: both turns and the streamed reply.
    contents = [m.content for m in req.messages]
    assert "first question" in contents and "second" in contents and contents[-1] == "a follow up"
    assert any(m.role is Role.ASSISTANT and "w39" in m.content for m in req.messages)


def test_over_n_ctx_the_line_says_what_send_will_do_as_the_engine_fitted_it():
    dropped = P.PromptCounted(1, n_tokens=5000, last_tokens=1, n_ctx=4096, dropped_messages=6, fitted_tokens=2900)
    text, tip, sev = count_text(dropped, ContextPolicy.ROLLING)
    assert text == "1 token · prompt 5,000 of n_ctx 4,096: 6 oldest messages dropped"
    assert sev is Severity.WARNING and tip.startswith(text + "\n\n") and "sends 2,900 tokens" in tip
    assert "Your message is 1 token." in tip  # one token, not "1 tokens"
    refused = P.PromptCounted(1, 5000, 400, 4096, dropped_messages=-1)
    text, tip, sev = count_text(refused, ContextPolicy.STOP)
    assert text == "400 tokens · prompt 5,000 of n_ctx 4,096: too long to send" and sev is Severity.ERROR
    assert "Stop at the limit" in tip
    # Under "drop oldest turns" a message too long on its own is refused too, and the tooltip says why.
    text, tip, sev = count_text(refused, ContextPolicy.ROLLING)
    assert text.endswith("too long to send") and sev is Severity.ERROR and "Even with every older turn" in tip
    fits = count_text(P.PromptCounted(1, 4095, 12, 4096), ContextPolicy.STOP)
    assert fits[0] == "12 tokens · prompt 4,095 of n_ctx 4,096 · 1 left" and fits[2] is Severity.INFO


def _n_ctx(window, n_ctx: int, qtbot) -> None:
    """Load the model again with ``n_ctx`` (the Model panel's Apply does the same)."""
    from dataclasses import replace

    model = window.engine.model
    settings = replace(model.settings, n_ctx=n_ctx)
    with qtbot.waitSignal(window.engine.model_loaded, timeout=5000):
        window.engine.load_model(model.info.path, settings)


def test_the_fake_drops_or_refuses_like_the_engine_and_the_line_follows_the_policy(qtbot, window):
    _n_ctx(window, 256, qtbot)
    for _ in range(2):
        send(qtbot, window, " ".join(["talk"] * 40))
    box = window.composer.box
    window.loader.remember(replace_policy(window, ContextPolicy.STOP))
    qtbot.keyClicks(box, " ".join(["more"] * 100))
    qtbot.waitUntil(lambda: _counted(window) is not None, timeout=3000)
    assert _counted(window).dropped_messages == -1
    assert window.composer.count.text().endswith("too long to send")
    assert window.composer.count.property("kind") == "error"
    # Switching the policy recounts at once (no key pressed): the oldest turns would be dropped.
    window.loader.remember(replace_policy(window, ContextPolicy.ROLLING))
    qtbot.waitUntil(lambda: _counted(window) is not None and _counted(window).dropped_messages > 0, timeout=3000)
    assert "oldest messages dropped" in window.composer.count.text()
    assert window.composer.count.property("kind") == "warning"


def replace_policy(window, policy: ContextPolicy):
    from dataclasses import replace

    return replace(window.loader.current_load, context_policy=policy)


def test_an_answer_for_text_since_deleted_never_shows_under_an_empty_box(qtbot, window):
    box = window.composer.box
    window.engine.pause()  # the engine is slow to answer (a huge paste, a busy engine)
    qtbot.keyClicks(box, "some words here")
    qtbot.waitUntil(lambda: len(window.engine.sent(P.CountPrompt)) == 1, timeout=3000)
    box.clear()  # before the answer comes
    _debounce_over(qtbot, window)  # the empty box is settled
    with qtbot.waitSignal(window.engine.prompt_counted, timeout=3000):  # the counter's slot runs first
        window.engine.resume()  # then the late answer for the deleted text arrives
    assert window.composer.count.text() == "" and _counted(window) is None


def test_a_template_that_rejects_the_chat_is_named_on_the_line_and_unload_clears_it(qtbot, window):
    window.settings_ctl.apply(lambda s: s.with_chat_template(window.engine.model.info.path, "{% for %}"))
    qtbot.keyClicks(window.composer.box, "hello")
    qtbot.waitUntil(lambda: "does not compile" in window.composer.count.text(), timeout=3000)
    assert window.composer.count.property("kind") == "error"
    window.settings_ctl.apply(lambda s: s.with_chat_template(window.engine.model.info.path, None))
    qtbot.waitUntil(lambda: _counted(window) is not None, timeout=3000)  # recounted on the setting alone
    assert window.composer.count.text().startswith("1 token · prompt ")
    window.unload_model()
    qtbot.waitUntil(lambda: window.composer.count.text() == "", timeout=3000)


def test_the_count_line_takes_its_colour_from_the_severity(qtbot, window):
    window.composer.set_count("x", "", Severity.ERROR)
    assert window.composer.count.property("kind") == "error"
    window.composer.set_count("y")
    assert window.composer.count.property("kind") == "info"


def _height_applied(qtbot, box) -> None:
    """Wait until the window's layout gave the box the height it fixed for its lines (the resize,
    and the scroll bar's range with it, follow on the next layout pass)."""
    qtbot.waitUntil(lambda: box.height() == box.maximumHeight(), timeout=3000)


def test_the_box_grows_with_its_wrapped_lines_and_scrolls_only_past_eight(qtbot, window):
    box = window.composer.box
    window.resize(1366, 768)
    window.show()
    qtbot.waitExposed(window)
    heights = []
    for words in (1, 40, 400):
        box.setPlainText("word " * words)
        _height_applied(qtbot, box)
        lines = int(box.document().size().height())
        heights.append(box.height())
        # Every line shows (no scroll bar) up to 8 lines; past that it scrolls.
        assert (box.verticalScrollBar().maximum() == 0) == (lines <= 8), (words, lines)
    assert heights[0] < heights[1] < heights[2]
    one_line = heights[0]
    box.clear()
    _height_applied(qtbot, box)
    assert box.height() == one_line and box.verticalScrollBar().maximum() == 0
