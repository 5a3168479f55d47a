"""Cases E3-E11 (docs/field-cases.md) on the real SmolLM2, through the engine process (E1 and E2 are in
test_textstream.py and test_utf8_real_tokens.py)."""

from __future__ import annotations

import threading
import time

import pytest

from app.core import protocol as P
from app.core.chat.context import ChatMessage, LoadSettings, StopReason
from app.core.gguf.gguf_info import MissingSplitParts, check_loadable
from app.core.sampling.params import SamplerSettings
from app.engine.host import EngineHost
from tests.support.engine import ROLLING_POLICY, STOP_POLICY, SYSTEM
from tests.support.models import write_split_model


def _texts(events) -> list[str]:
    return [e.text for e in events if isinstance(e, P.TokenEvent)]


# ---------------------------------------------------------------------------------- E9, E7, E8
def test_e9_temperature_zero_is_greedy_and_repeatable(engine):
    replies = []
    for _ in range(3):
        fin = engine.generate([SYSTEM, ("user", "Name three colours of the rainbow.")], temperature=0.0, max_tokens=40)
        assert isinstance(fin, P.Finished), fin
        replies.append(fin.text)
    assert replies[0].strip(), "greedy reply is empty"
    assert replies[0] == replies[1] == replies[2]


def test_e7_top_p_one_does_not_make_replies_deterministic(engine):
    replies = set()
    for _ in range(5):
        fin = engine.generate(
            [SYSTEM, ("user", "Invent a name for a cat.")],
            temperature=1.0,
            top_p=1.0,
            top_k=40,
            min_p=0.0,
            seed=None,
            max_tokens=16,
        )
        assert isinstance(fin, P.Finished), fin
        replies.add(fin.text)
    assert len(replies) >= 2, replies


def test_e8_top_k_zero_means_off(engine):
    replies = []
    seeds = set()
    for _ in range(5):
        fin = engine.generate(
            [SYSTEM, ("user", "Say something about the weather.")],
            temperature=1.5,
            top_k=0,
            top_p=1.0,
            min_p=0.0,
            max_tokens=16,
        )
        assert isinstance(fin, P.Finished), fin
        replies.append(fin.text)
        seeds.add(fin.stats.seed)
    assert len(set(replies)) >= 3, replies  # top_k=0 as "keep one" would make them identical
    assert len(seeds) == 5  # a fresh random seed each reply, and it is reported


def test_fixed_seed_reproduces_a_sampled_reply(engine):
    msgs = [SYSTEM, ("user", "Write one sentence about the moon.")]
    a = engine.generate(msgs, temperature=1.0, seed=1234, max_tokens=24)
    b = engine.generate(msgs, temperature=1.0, seed=1234, max_tokens=24)
    assert a.stats.seed == b.stats.seed == 1234
    assert a.text == b.text


# ---------------------------------------------------------------------------------- E3: Stop
@pytest.mark.timing  # requirement E3: the engine is idle within 1 s of Stop
def test_e3_stop_during_a_runaway_reply(engine):
    events: list = []
    cancel_at: list[float] = []
    first_token = threading.Event()

    def stopper():
        first_token.wait(60)
        time.sleep(2.0)  # the person watches the reply run for 2 s, then presses Stop
        cancel_at.append(time.monotonic())
        engine.host.cancel()

    def on_event(ev):
        if isinstance(ev, P.TokenEvent):
            first_token.set()

    t = threading.Thread(target=stopper)
    t.start()
    try:
        fin = engine.generate(
            [SYSTEM, ("user", "Write a numbered list from 1 to 5000, one number per line.")],
            events=events,
            on_event=on_event,
            temperature=0.0,
            max_tokens=-1,
            repeat_penalty=1.0,
        )
    finally:
        first_token.set()
        t.join()
    done_at = time.monotonic()
    assert isinstance(fin, P.Finished)
    assert fin.stats.stop_reason == StopReason.CANCELLED.value
    assert done_at - cancel_at[0] < 1.0, f"stopped {done_at - cancel_at[0]:.2f} s after Stop"
    assert fin.text and fin.text == "".join(_texts(events))
    assert fin.stats.generated_tokens > 20
    # The engine is idle and answers the next request.
    nxt = engine.generate([SYSTEM, ("user", "Say hi.")], temperature=0.0, max_tokens=8)
    assert isinstance(nxt, P.Finished) and nxt.stats.stop_reason != StopReason.CANCELLED.value


@pytest.mark.timing  # requirement E3: the engine is idle within 1 s of Stop
def test_e3_stop_during_a_long_prompt(engine):
    long_text = " ".join(f"Item {i} is a small blue box on a shelf." for i in range(215))
    events: list = []
    cancel_at: list[float] = []

    def on_event(ev):
        if isinstance(ev, P.PrefillProgress) and not cancel_at:
            cancel_at.append(time.monotonic())
            engine.host.cancel()

    fin = engine.generate(
        [SYSTEM, ("user", long_text + "\nSummarise the list.")],
        events=events,
        on_event=on_event,
        temperature=0.0,
        max_tokens=20,
    )
    done_at = time.monotonic()
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert prepared.to_evaluate > 2500
    assert isinstance(fin, P.Finished)
    assert fin.stats.stop_reason == StopReason.CANCELLED.value
    assert fin.stats.evaluated_tokens < prepared.to_evaluate, "Stop took effect only after prefill finished"
    assert fin.stats.generated_tokens == 0
    assert done_at - cancel_at[0] < 1.0, f"stopped {done_at - cancel_at[0]:.2f} s after Stop"


def test_a_stop_during_prefill_writes_no_error_to_the_engine_log(smollm2, tmp_path):
    """llama.cpp logs an aborted llama_decode as errors; after a Stop they are expected, not errors."""
    log_path = tmp_path / "engine.log"
    host = EngineHost(log_path=str(log_path))
    host.start()
    try:
        assert isinstance(host.recv(60), P.EngineReady)
        assert isinstance(
            host.request(P.LoadModel(host.next_id(), str(smollm2), LoadSettings(n_ctx=4096))), P.ModelLoaded
        )
        long_text = " ".join(f"Item {i} is a small blue box on a shelf." for i in range(215))

        def on_event(ev):
            if isinstance(ev, P.PrefillProgress):
                host.cancel()

        req = P.Generate(host.next_id(), (ChatMessage("user", long_text),), SamplerSettings(max_tokens=5))
        fin = host.request(req, timeout=120, on_event=on_event)
        assert isinstance(fin, P.Finished) and fin.stats.stop_reason == StopReason.CANCELLED.value
    finally:
        host.stop()
    text = log_path.read_text(encoding="utf-8")
    assert "after Stop (llama.cpp error): llama_decode: failed to decode, ret = 2" in text
    assert " ERROR " not in text and " WARNING " not in text, text


# ---------------------------------------------------------------------------------- E4, E5
def test_e4_prompt_longer_than_the_context(fresh_engine):
    eng = fresh_engine(n_ctx=512, context_policy=STOP_POLICY)
    long_msg = " ".join(f"word{i}" for i in range(350))  # about 700 tokens
    fail = eng.generate([SYSTEM, ("user", long_msg)], temperature=0.0, max_tokens=10)
    assert isinstance(fail, P.Failed)
    assert fail.kind is P.FailureKind.CONTEXT_OVERFLOW  # an enum member across the process pipe
    n_prompt = int(fail.message.split("conversation is ")[1].split(" tokens")[0].replace(",", ""))
    assert n_prompt > 512
    assert "512" in fail.message and "n_ctx" in fail.message
    assert "Raise n_ctx" in fail.message
    # The next message works without reloading.
    ok = eng.generate([SYSTEM, ("user", "Say hello.")], temperature=0.0, max_tokens=8)
    assert isinstance(ok, P.Finished) and ok.text.strip()


def test_e4_rolling_policy_points_at_the_message_itself(fresh_engine):
    eng = fresh_engine(n_ctx=512, context_policy=ROLLING_POLICY)
    long_msg = " ".join(f"word{i}" for i in range(350))
    fail = eng.generate([SYSTEM, ("user", long_msg)], temperature=0.0, max_tokens=10)
    assert isinstance(fail, P.Failed) and fail.kind is P.FailureKind.CONTEXT_OVERFLOW
    assert "Your message alone takes" in fail.message and "512" in fail.message


def test_e4_a_message_longer_than_the_trained_context_is_not_told_to_raise_n_ctx(fresh_engine):
    """Review of issue 20: a paste longer than SmolLM2's trained 8,192 tokens was told to raise n_ctx."""
    eng = fresh_engine(n_ctx=512, context_policy=STOP_POLICY)
    paste = " ".join(f"word{i}" for i in range(4500))  # about 9,000 tokens: more than the trained 8,192
    fail = eng.generate([SYSTEM, ("user", paste)], temperature=0.0, max_tokens=10)
    assert isinstance(fail, P.Failed) and fail.kind is P.FailureKind.CONTEXT_OVERFLOW
    assert "Raise n_ctx" not in fail.message and "raising n_ctx would not help" in fail.message
    assert "8,192" in fail.message and "shorten the message" in fail.message


def test_e4_rolling_policy_drops_oldest_turns(fresh_engine):
    eng = fresh_engine(n_ctx=512, context_policy=ROLLING_POLICY)
    filler = " ".join(f"fact{i}" for i in range(110))
    history = [SYSTEM]
    for i in range(3):
        history += [("user", f"Remember this: {filler}"), ("assistant", f"Noted {i}.")]
    history.append(("user", "What is two plus two?"))
    events: list = []
    fin = eng.generate(history, events=events, temperature=0.0, max_tokens=12)
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    assert prepared.dropped_messages >= 2 and prepared.prompt_tokens < 512
    assert fin.stats.dropped_messages == prepared.dropped_messages


def test_e5_context_fills_during_the_reply_stop_policy(fresh_engine):
    eng = fresh_engine(n_ctx=256, context_policy=STOP_POLICY)
    events: list = []
    fin = eng.generate(
        [SYSTEM, ("user", "Tell me a very long story about a dragon and a knight.")],
        events=events,
        temperature=0.0,
        max_tokens=-1,
        repeat_penalty=1.0,
    )
    assert isinstance(fin, P.Finished)
    assert fin.stats.stop_reason in (StopReason.CONTEXT_FULL.value, StopReason.EOS.value)
    if fin.stats.stop_reason == StopReason.EOS.value:
        pytest.fail(f"the model ended after {fin.stats.generated_tokens} tokens; the prompt must fill n_ctx")
    assert fin.stats.context_used == 256
    assert fin.text == "".join(_texts(events))  # the partial reply is kept whole
    assert "\ufffd" not in fin.text
    assert fin.stats.prompt_tokens + fin.stats.generated_tokens >= 256
    # The engine goes on: the next turn (with the policy's limits) still answers.
    ok = eng.generate([SYSTEM, ("user", "Say hello.")], temperature=0.0, max_tokens=8)
    assert isinstance(ok, P.Finished)


def test_e5_context_fills_during_the_reply_rolling_policy(fresh_engine):
    eng = fresh_engine(n_ctx=256, context_policy=ROLLING_POLICY)
    events: list = []
    fin = eng.generate(
        [SYSTEM, ("user", "Count from 1 to 400, separated by commas.")],
        events=events,
        temperature=0.0,
        max_tokens=400,
        repeat_penalty=1.0,
    )
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    shifts = [e for e in events if isinstance(e, P.ContextShifted)]
    assert shifts, f"no context shift; stop reason {fin.stats.stop_reason}, {fin.stats.generated_tokens} tokens"
    assert fin.stats.context_shifts == len(shifts)
    assert fin.stats.generated_tokens > 256 - fin.stats.prompt_tokens
    assert fin.stats.context_used <= 256
    assert fin.text == "".join(_texts(events))
    assert "\ufffd" not in fin.text


# ---------------------------------------------------------------------------------- E10, E11
@pytest.mark.timeout(180)  # 49 s in the suite on this machine (tests/ durations, 2 cores)
def test_e10_decode_speed_is_shown_honestly(fresh_engine):
    """Decode speed = (generated - 1) / (t_last - t_first); prefill and TTFT are separate.

    With a 135M model, attention over 800 cached tokens is a real share of each
    decode step (llama.cpp's own timer shows it too), so "about equal" is checked
    against llama.cpp's counters rather than as a fixed ratio between the prompts.
    """
    eng = fresh_engine(n_ctx=4096)
    long_prompt = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(60))
    msgs_long = [SYSTEM, ("user", long_prompt + "\nNow count from 1 to 50.")]
    msgs_short = [SYSTEM, ("user", "Count from 1 to 50.")]
    eng.generate(msgs_short, temperature=0.0, max_tokens=4)  # warm up
    results = {}
    for name, msgs in (("long", msgs_long), ("short", msgs_short)):
        eng.host.request(P.ResetContext(eng.host.next_id()))
        results[name] = eng.generate(msgs, temperature=0.0, max_tokens=20, repeat_penalty=1.0).stats
    long, short = results["long"], results["short"]
    assert long.prompt_tokens > 750 and short.prompt_tokens < 40
    assert long.generated_tokens == short.generated_tokens == 20
    for s in (long, short):
        # The formula, from the engine's own clock...
        assert s.decode_tok_s == pytest.approx((20 - 1) / s.decode_s)
        # ...agrees with llama.cpp's timer of the same decode steps.
        assert s.llama_n_decode == 19
        assert s.llama_n_decode / (s.llama_decode_ms / 1000) == pytest.approx(s.decode_tok_s, rel=0.3)
        assert s.prefill_tok_s > 0 and s.evaluated_tokens == s.prompt_tokens
    # Prefill time is in TTFT, not in the decode speed: counting it would divide the long
    # prompt's speed by ~10 (19 tokens over prefill + decode); it stays the same order as the short one.
    contaminated = 19 / (long.prefill_s + long.decode_s)
    assert long.decode_tok_s > 4 * contaminated
    assert long.decode_tok_s > 0.35 * short.decode_tok_s, (long.decode_tok_s, short.decode_tok_s)
    assert long.ttft_s > 3 * short.ttft_s
    assert long.ttft_s >= long.prefill_s


def test_e11_second_turn_reuses_the_cache(engine):
    engine.host.request(P.ResetContext(engine.host.next_id()))
    first_msgs = [SYSTEM, ("user", "Write a long essay about the history of bread.")]
    first = engine.generate(first_msgs, temperature=0.0, max_tokens=300, repeat_penalty=1.0)
    assert first.stats.generated_tokens >= 250, first.stats
    events: list = []
    second = engine.generate(
        [*first_msgs, ("assistant", first.text), ("user", "Thanks! Now a title for it.")],
        events=events,
        temperature=0.0,
        max_tokens=16,
    )
    prepared = next(e for e in events if isinstance(e, P.PromptPrepared))
    # Everything up to the end of the first reply is reused; only the new message and glue is evaluated.
    assert second.stats.cached_tokens >= first.stats.prompt_tokens + first.stats.generated_tokens - 3
    assert (
        second.stats.evaluated_tokens == prepared.to_evaluate == second.stats.prompt_tokens - second.stats.cached_tokens
    )
    assert second.stats.evaluated_tokens < 30
    assert "Thanks" in "".join(text for _, text in prepared.new_tokens)


def test_new_chat_starts_from_an_empty_context(engine):
    engine.generate([SYSTEM, ("user", "My name is Zanzibar.")], temperature=0.0, max_tokens=8)
    engine.host.request(P.ResetContext(engine.host.next_id()))
    fin = engine.generate([SYSTEM, ("user", "Hello.")], temperature=0.0, max_tokens=8)
    assert fin.stats.cached_tokens == 0
    assert fin.stats.evaluated_tokens == fin.stats.prompt_tokens


# ---------------------------------------------------------------------------------- E6
def _bad_files(tmp_path, smollm2):
    text = tmp_path / "x.gguf"
    text.write_text("hello, this is not a model\n" * 10)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    half = tmp_path / "half.gguf"
    with open(smollm2, "rb") as src, open(half, "wb") as dst:
        dst.write(src.read(smollm2.stat().st_size // 2))
    ggml = tmp_path / "old-model.bin"
    ggml.write_bytes(b"tjgg" + b"\x01\x00\x00\x00" + bytes(4096))
    return {"text": text, "empty": empty, "half": half, "ggml": ggml}


@pytest.mark.parametrize(
    "kind,needle",
    [
        ("text", "not a GGUF model"),
        ("empty", "empty (0 bytes)"),
        ("half", "cut short"),
        ("ggml", "old GGJT model file"),
    ],
)
def test_e6_files_that_are_not_models(engine, tmp_path, smollm2, kind, needle):
    path = _bad_files(tmp_path, smollm2)[kind]
    fail = engine.load(path, n_ctx=2048)
    assert isinstance(fail, P.Failed)
    assert fail.kind is P.FailureKind.BAD_MODEL  # refused by Glassbox's check: llama.cpp never saw the file
    assert path.name in fail.message and needle in fail.message
    # The engine is alive and loads a real model next.
    ok = engine.load(smollm2, n_ctx=4096)
    assert isinstance(ok, P.ModelLoaded)


# ---------------------------------------------------------------------------------- streaming
def test_streamed_text_equals_final_text_and_stop_strings_are_cut(engine):
    msgs = [SYSTEM, ("user", "Describe a sunny day at the beach in three sentences.")]
    full = engine.generate(msgs, temperature=0.0, max_tokens=60)
    words = full.text.split()
    assert len(words) > 8, full.text
    stop = " " + words[6]  # a word in the middle of the greedy reply
    cut_at = full.text.index(stop)
    events: list = []
    fin = engine.generate(msgs, events=events, temperature=0.0, max_tokens=60, stop_strings=(stop,))
    assert fin.stats.stop_reason == StopReason.STOP_STRING.value
    assert fin.text == full.text[:cut_at]  # same greedy reply, cut just before the stop string
    assert fin.text == "".join(_texts(events))  # nothing of the stop string was ever streamed


def test_no_model_loaded_is_a_clear_failure():
    from app.engine.host import EngineHost

    host = EngineHost()
    host.start()
    try:
        assert isinstance(host.recv(60), P.EngineReady)
        fail = host.request(P.Generate(host.next_id(), (ChatMessage("user", "hi"),), SamplerSettings()))
        assert (
            isinstance(fail, P.Failed) and fail.kind is P.FailureKind.NO_MODEL and "Open a GGUF model" in fail.message
        )
    finally:
        host.stop()


@pytest.mark.timeout(90)  # 28 s in the suite on this machine (tests/ durations, 2 cores)
def test_greedy_replies_repeat_after_new_chat_even_on_gemma(gemma):
    """Fresh prefills cut the prompt the same way every time, so a greedy reply repeats
    exactly after "New chat" too (Gemma 3 is sensitive to how a prompt is batched)."""
    from tests.support.engine import start_engine

    eng = start_engine(gemma, n_ctx=2048, n_batch=256)
    try:
        prompt = " ".join(f"Line {i}: a fox jumps." for i in range(80)) + "\nNow count from 1 to 30."
        replies = []
        for _ in range(3):
            eng.host.request(P.ResetContext(eng.host.next_id()))
            fin = eng.generate([("user", prompt)], temperature=0.0, max_tokens=24, repeat_penalty=1.0)
            assert fin.stats.cached_tokens == 0 and fin.stats.evaluated_tokens > 512
            replies.append(fin.text)
        assert replies[0] == replies[1] == replies[2], replies
    finally:
        eng.host.stop()


def test_out_of_range_sampler_values_are_refused_clearly(engine):
    fail = engine.generate([SYSTEM, ("user", "Hi")], top_p=1.5, max_tokens=4)
    assert isinstance(fail, P.Failed) and fail.kind is P.FailureKind.BAD_SETTINGS
    assert "top_p = 1.5" in fail.message and "between 0.0 and 1.0" in fail.message


def test_e6_split_model_with_a_missing_part_is_refused_with_the_windows_message(engine, tmp_path, smollm2):
    parts = write_split_model(tmp_path / "split", "Tiny-Split-Q4_0", 3)
    parts[1].unlink()
    fail = engine.load(parts[0], n_ctx=2048)
    assert isinstance(fail, P.Failed) and fail.kind is P.FailureKind.BAD_MODEL
    with pytest.raises(MissingSplitParts) as exc:  # the check the window runs before sending LoadModel
        check_loadable(parts[0])
    assert fail.message == exc.value.message
    assert parts[0].name in fail.message and parts[1].name in fail.message and "is missing" in fail.message
    ok = engine.load(smollm2, n_ctx=4096)
    assert isinstance(ok, P.ModelLoaded)
