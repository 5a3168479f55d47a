"""What a message's widget shows (app/ui/chat/presenter.py), without Qt: title, branch, badge,
footer, provenance, and why Continue is off."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

from app.core.chat.context import ContextPolicy, GenerationStats, LoadSettings, Role, StopReason
from app.core.conversations import Message, MessageMeta, Siblings
from app.core.sampling.params import SamplerSettings
from app.ui.chat.presenter import (
    CUT_OFF,
    NO_BADGE,
    THINKING,
    WRITING,
    Badge,
    BadgeKind,
    ContinueRule,
    ended_look,
    stopped_badge,
    stored_look,
    writing_look,
)
from app.ui.common.stats_format import reply_details, reply_footer, stats_footer

STATS = GenerationStats(prompt_tokens=20, generated_tokens=7, ttft_s=0.2, n_ctx=2048)
META = MessageMeta(
    model_path="/m/Tiny-Chat-Q4_1.gguf",
    model_name="Tiny-Chat-Q4_1",
    quant="Q4_1",
    sampler=SamplerSettings(),
    load=LoadSettings(n_ctx=2048),
    stats=STATS,
    stop_strings=("END",),
)
ONE = Siblings((5,), 0)


def _msg(role: Role = Role.ASSISTANT, complete: bool = True, meta: MessageMeta = META, mid: int = 5) -> Message:
    return Message(mid, 1, None, role, "Hello there.", 0.0, complete, meta)


def test_the_presenter_imports_no_qt():
    code = "import sys, app.ui.chat.presenter; print(any(m.startswith('PySide6') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_finished_reply_shows_its_model_figures_and_provenance():
    look = stored_look(_msg(), Siblings((4, 5, 6), 1), has_alternatives=True, rule=ContinueRule())
    assert look.title == "Tiny-Chat-Q4_1" and look.branch == (2, 3) and look.text == "Hello there."
    assert look.badge == NO_BADGE and look.footer == stats_footer(META) and look.how_made == reply_details(META)
    assert "stop strings: “END”" in look.how_made
    assert look.can_show_tokens and not look.can_continue and not look.streaming


def test_a_question_offers_reply_only_when_left_unanswered():
    q = _msg(Role.USER, meta=MessageMeta())
    assert stored_look(q, ONE, has_alternatives=False, rule=ContinueRule()).can_reply is False
    look = stored_look(q, ONE, has_alternatives=False, rule=ContinueRule(), unanswered=True)
    assert look.can_reply and look.title == "" and look.footer == "" and look.how_made == ""


def test_a_cut_off_reply_is_badged_by_its_stop_reason_and_offers_continue():
    for reason, text, kind in (
        (StopReason.CANCELLED, "stopped", BadgeKind.WARN),
        (StopReason.MAX_TOKENS, "max_tokens reached", BadgeKind.WARN),
        (StopReason.ERROR, "cut off", BadgeKind.ERROR),
        (StopReason.EOS, "cut off", BadgeKind.WARN),  # stored incomplete although it ended: still cut
    ):
        meta = replace(META, stats=replace(STATS, stop_reason=reason))
        look = stored_look(_msg(complete=False, meta=meta), ONE, has_alternatives=False, rule=ContinueRule())
        assert look.badge == Badge(text, kind) and look.can_continue and look.why_no_continue == ""
    no_stats = stored_look(_msg(complete=False, meta=MessageMeta()), ONE, has_alternatives=False, rule=ContinueRule())
    assert no_stats.badge == CUT_OFF and no_stats.title == "Assistant"


def test_continue_after_a_full_context_says_why_it_cannot_work():
    meta = replace(META, stats=replace(STATS, stop_reason=StopReason.CONTEXT_FULL))
    m = _msg(complete=False, meta=meta)
    look = stored_look(m, ONE, has_alternatives=False, rule=ContinueRule(ContextPolicy.STOP, 2048))
    assert look.badge.text == "context full" and look.can_continue
    assert "The context is full (2,048 tokens, n_ctx)" in look.why_no_continue
    for rule in (ContinueRule(ContextPolicy.ROLLING, 2048), ContinueRule(ContextPolicy.STOP, 4096)):
        assert stored_look(m, ONE, has_alternatives=False, rule=rule).why_no_continue == ""


def test_a_reply_being_written_then_ended():
    base = stored_look(_msg(meta=replace(META, stats=None)), ONE, has_alternatives=True, rule=ContinueRule())
    thinking = writing_look(base, "", wrote=False)
    assert thinking.badge == THINKING and thinking.streaming and not thinking.can_show_tokens
    assert thinking.footer == "" and not thinking.can_continue and thinking.how_made == base.how_made
    assert writing_look(base, "Hel", wrote=True).badge == WRITING
    done = ended_look(base, "Hello.", stopped_badge(STATS), STATS, META, ContinueRule())
    assert done.badge == NO_BADGE and done.footer == stats_footer(META) and not done.streaming
    assert not done.can_continue and done.how_made == reply_details(META)
    stopped = replace(STATS, stop_reason=StopReason.CANCELLED)
    cut = ended_look(base, "Hel", stopped_badge(stopped), stopped, None, ContinueRule())
    assert cut.badge.text == "stopped" and cut.can_continue and cut.footer == reply_footer(stopped)
    assert cut.how_made == base.how_made  # not saved: the provenance it started with stays
    empty = ended_look(base, "", CUT_OFF, None, None, ContinueRule())
    assert not empty.can_continue and empty.footer == ""


def test_a_tool_results_content_shows_readably_and_other_text_as_it_is() -> None:
    from app.core.tools.history import tool_result_text
    from app.ui.chat.presenter import tool_result_readable

    one = tool_result_text("echo", "call_1", "a\nb")
    assert tool_result_readable(one) == "a\nb"
    two = one + "\n" + tool_result_text("add", "call_2", '{"sum":5}')
    assert tool_result_readable(two) == 'echo:\na\nb\n\nadd:\n{\n  "sum": 5\n}'
    assert tool_result_readable('{"tool_response" is what I typed') is None
    assert tool_result_readable("hello") is None
