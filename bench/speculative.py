"""Speculative decoding's speed-up, measured in Glassbox's engine: decode tok/s with and without, per drafter.

Cases, each its own engine process with the speculation loaded, every reply greedy
(temperature 0) so both ways give the same text (or differ at a near tie, see
app/engine/speculative/loop.py):

(a) ``code``: prompt lookup on a prompt that asks to repeat a ~400-token code listing with one change
    (the case prompt lookup is for; the goal is >= 1.5x on SmolLM2);
(b) ``chat``: prompt lookup on ordinary chat prompts (little to copy: where it loses);
``gemma``: prompt lookup on Gemma 3 270M (``GLASSBOX_TEST_GEMMA``) continuing a document with the
listing again (a model that copies faithfully);
``cost``: what a verification batch of m tokens costs in one-token steps (:func:`batch_cost`);
(c) ``draft``: SmolLM2 Q4_1 as the draft model of its Q8_0 requantization (made by Glassbox's own
    quantizer, cached: tests/support/quantized.py), on the chat prompts and on the code prompt.

Each repeat runs the reply without (``Generate.speculate=False``) and with speculation back to back,
alternating which goes first; the figures are medians over the repeats and prompts, and ``speedup`` is
the median of the per-pair ratios (steadier than a ratio of medians on a shared, drifting machine).
Decode tok/s = (generated - 1) / (last token time - first token time), as everywhere in Glassbox.
Also per case: the mean verification batch (the round's token plus its draft), what one verification
costs in plain one-token steps of the same model (``verify_s / rounds x plain tok/s``), and the tokens
a round yields: speculation wins when tokens per round exceed the verification's cost.

Usage::

    python bench/speculative.py [--model PATH] [--threads N] [--gen 200] [--repeats 3] [--draft-max 8]

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LISTING = """import json
import os
from dataclasses import dataclass, field


@dataclass
class Task:
    name: str
    priority: int = 0
    done: bool = False
    tags: list[str] = field(default_factory=list)


class TaskList:
    def __init__(self, path):
        self.path = path
        self.tasks = []

    def load(self):
        if not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as f:
            for item in json.load(f):
                self.tasks.append(Task(**item))

    def save(self):
        data = [task.__dict__ for task in self.tasks]
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)

    def add(self, name, priority=0, tags=None):
        task = Task(name, priority, False, list(tags or []))
        self.tasks.append(task)
        return task

    def complete(self, name):
        for task in self.tasks:
            if task.name == name:
                task.done = True
                return True
        return False

    def pending(self):
        return [task for task in self.tasks if not task.done]

    def by_priority(self):
        return sorted(self.pending(), key=lambda task: -task.priority)

    def with_tag(self, tag):
        return [task for task in self.tasks if tag in task.tags]


if __name__ == "__main__":
    tasks = TaskList("tasks.json")
    tasks.load()
    tasks.add("write report", priority=2, tags=["work"])
    tasks.add("buy milk", tags=["home"])
    for task in tasks.by_priority():
        print(task.priority, task.name)
    tasks.save()
"""

CODE_PROMPT = f"```python\n{LISTING}```\n\nCopy the code above exactly, changing only `pending` to `open_tasks`."

#: For Gemma 3 270M (a base model, no chat template): a document whose continuation is the listing again.
COPY_DOCUMENT = f"```python\n{LISTING}```\n\nThe same file with `pending` renamed to `open_tasks`:\n\n```python\n"

CHAT_PROMPTS = (
    "Explain in a short paragraph why the sky is blue.",
    "Give me three tips for sleeping better.",
    "What is the difference between a list and a tuple in Python?",
)


def run(host, prompt: str, gen: int, speculate: bool | None, system: str = "You are a helpful assistant."):
    from app.core import protocol as P
    from app.core.chat.context import ChatMessage
    from app.core.sampling.params import SamplerSettings

    host.request(P.ResetContext(host.next_id()))
    msgs = (ChatMessage("system", system), ChatMessage("user", prompt))
    fin = host.request(
        P.Generate(
            host.next_id(),
            msgs,
            SamplerSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=gen),
            speculate=speculate,
        ),
        timeout=900,
    )
    assert isinstance(fin, P.Finished), getattr(fin, "message", fin)
    return fin


def measure(model: str, spec, prompts, args, label: str, system: str = "You are a helpful assistant.") -> dict:
    from app.core import protocol as P
    from app.core.chat.context import LoadSettings
    from app.engine.host import EngineHost

    host = EngineHost()
    host.start()
    host.recv(60)
    try:
        loaded = host.request(
            P.LoadModel(host.next_id(), model, LoadSettings(n_ctx=2048, n_threads=args.threads, speculation=spec))
        )
        assert isinstance(loaded, P.ModelLoaded), getattr(loaded, "message", loaded)
        plain_tps, spec_tps, ratios, rates, per_round, same = [], [], [], [], [], 0
        batch, round_cost, tokens_per_round, chosen = [], [], [], []
        steps: tuple[float, ...] = ()
        ends: dict[str, int] = {}
        drafted_at: list[int] = []
        accepted_at: list[int] = []
        times = {"draft_s": 0.0, "verify_s": 0.0, "sample_s": 0.0}
        pairs = 0
        for r in range(args.repeats):
            for j, prompt in enumerate(prompts):
                order = (False, None) if (r + j) % 2 == 0 else (None, False)
                got = {o: run(host, prompt, args.gen, o, system) for o in order}
                a, b = got[False], got[None]
                s = b.stats.speculation
                assert s is not None
                plain_tps.append(a.stats.decode_tok_s)
                spec_tps.append(b.stats.decode_tok_s)
                ratios.append(b.stats.decode_tok_s / a.stats.decode_tok_s)
                rates.append(s.acceptance_rate)
                if s.rounds:
                    batch.append((s.drafted + s.rounds) / s.rounds)
                    # one verification, in plain one-token steps of the same model (its speed in this pair)
                    round_cost.append(s.verify_s / s.rounds * a.stats.decode_tok_s)
                    tokens_per_round.append((b.stats.generated_tokens - 1) / s.rounds)
                per_round.append(s.mean_accepted_per_round)
                chosen.append(s.chosen_mean)
                steps = s.verify_steps or steps
                same += a.text == b.text
                pairs += 1
                for end, n in s.round_ends:
                    ends[end.value] = ends.get(end.value, 0) + n
                for i, n in enumerate(s.drafted_at):
                    drafted_at += [0] * (i + 1 - len(drafted_at))
                    drafted_at[i] += n
                for i, n in enumerate(s.accepted_at):
                    accepted_at += [0] * (i + 1 - len(accepted_at))
                    accepted_at[i] += n
                for k in times:
                    times[k] += getattr(s, k)
                print(
                    f"{label} r{r} p{j}: plain {a.stats.decode_tok_s:.1f} tok/s, speculative "
                    f"{b.stats.decode_tok_s:.1f} tok/s (x{ratios[-1]:.2f}), accepted {s.accepted}/{s.drafted} "
                    f"in {s.rounds} rounds (mean draft {s.chosen_mean:.1f}), same text: {a.text == b.text}",
                    flush=True,
                )
        out = {
            "plain_tok_s": statistics.median(plain_tps),
            "speculative_tok_s": statistics.median(spec_tps),
            "speedup": statistics.median(ratios),
            "speedup_min": min(ratios),
            "speedup_max": max(ratios),
            "acceptance_rate": statistics.median(rates),
            "mean_accepted_per_round": statistics.median(per_round),
            "same_text": f"{same}/{pairs}",
            "mean_batch_tokens": statistics.median(batch),
            "verify_cost_in_plain_steps": statistics.median(round_cost),
            "tokens_per_round": statistics.median(tokens_per_round),
            "round_ends": ends,
            "mean_draft_length": round(statistics.median(chosen), 2),
            "verify_steps_measured_by_the_engine": [round(x, 2) for x in steps],
            "acceptance_by_position": [
                round(a / d, 3) if d else 0.0 for a, d in zip(accepted_at, drafted_at, strict=False)
            ],
            "time_split_s": {k: round(v / pairs, 4) for k, v in times.items()},
            "replies": pairs,
        }
        if loaded.draft is not None:
            out["draft_weights_bytes"] = loaded.draft.weights_bytes
            out["draft_kv_bytes"] = loaded.draft.kv_bytes
        return out
    finally:
        host.stop()


def batch_cost(model: str, threads: int, sizes=(2, 3, 5, 9), blocks: int = 30) -> dict[str, float]:
    """What evaluating m tokens in one llama_decode (logits at each, as a verification asks) costs in
    one-token steps of the same model: m-token and one-token evaluations interleaved at the same
    context position (600 tokens in), ``blocks`` times each, median of the per-block ratios (a drifting,
    shared machine moves both alike)."""
    import llama_cpp

    from app.engine.llama_context import GlassboxLlama
    from app.engine.speculative.verify import Verifier

    llm = GlassboxLlama(
        model_path=model, n_ctx=2048, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    try:
        prompt = llm.tokenize(CODE_PROMPT.encode(), add_bos=True)[:600]
        llm.eval(prompt)
        verifier = Verifier(llm, max(sizes))
        mem = llama_cpp.llama_get_memory(llm.ctx)
        out: dict[str, float] = {}
        for m in sizes:
            ratios = []
            for _ in range(blocks):
                t = time.perf_counter_ns()
                llm.eval(prompt[:1])  # one token, as the plain loop evaluates it
                one = time.perf_counter_ns() - t
                llama_cpp.llama_memory_seq_rm(mem, 0, len(prompt), -1)
                llm.n_tokens = len(prompt)
                t = time.perf_counter_ns()
                verifier.decode(prompt[1 : 1 + m])
                many = time.perf_counter_ns() - t
                verifier.keep(len(prompt))
                ratios.append(many / one)
            out[str(m)] = round(statistics.median(ratios), 2)
        verifier.close()
        return out
    finally:
        llm.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.environ.get("GLASSBOX_TEST_SMOLLM2"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gen", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--p-min", type=float, default=0.75)
    ap.add_argument("--ngram", type=int, default=3)
    ap.add_argument("--cases", default="cost,code,chat,gemma,draft")
    ap.add_argument(
        "--fixed",
        action="store_true",
        help="every round drafts what the drafter has, up to draft_max (llama.cpp's way)",
    )
    args = ap.parse_args()
    if not args.model:
        ap.error("give --model or set GLASSBOX_TEST_SMOLLM2")
    from app.core.quant.types import QuantType
    from app.core.speculative.settings import Drafter, SpeculationSettings
    from tests.support.quantized import requantized

    adaptive = not args.fixed
    lookup = SpeculationSettings(True, Drafter.PROMPT_LOOKUP, args.draft_max, args.p_min, args.ngram, adaptive=adaptive)
    results: dict[str, object] = {
        "model": Path(args.model).name,
        "threads": args.threads,
        "gen": args.gen,
        "repeats": args.repeats,
        "draft_max": args.draft_max,
        "adaptive": adaptive,
        "ngram": args.ngram,
        "p_min": args.p_min,
    }
    cases = args.cases.split(",")
    if "cost" in cases:
        results["verify_cost_in_plain_steps_by_batch"] = batch_cost(args.model, args.threads)
        print("verify batch cost in one-token steps:", results["verify_cost_in_plain_steps_by_batch"], flush=True)
    if "code" in cases:
        results["code_prompt_lookup"] = measure(args.model, lookup, (CODE_PROMPT,), args, "code/lookup")
    if "chat" in cases:
        results["chat_prompt_lookup"] = measure(args.model, lookup, CHAT_PROMPTS, args, "chat/lookup")
    if "gemma" in cases and os.environ.get("GLASSBOX_TEST_GEMMA"):
        gemma = os.environ["GLASSBOX_TEST_GEMMA"]
        results["gemma_code_prompt_lookup"] = measure(gemma, lookup, (COPY_DOCUMENT,), args, "gemma code/lookup", "")
    if "draft" in cases:
        target = str(requantized(Path(args.model), QuantType.Q8_0))
        draft = SpeculationSettings(
            True, Drafter.DRAFT_MODEL, args.draft_max, args.p_min, args.ngram, args.model, adaptive=adaptive
        )
        results["draft_model_target"] = Path(target).name
        results["chat_draft_model"] = measure(target, draft, CHAT_PROMPTS, args, "chat/draft")
        results["code_draft_model"] = measure(target, draft, (CODE_PROMPT,), args, "code/draft")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
