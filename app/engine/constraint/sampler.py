"""GBNF text into llama.cpp's grammar sampler (``llama_sampler_init_grammar(vocab, text, "root")``), and
why it did not parse, with the line.

llama.cpp returns NULL for a grammar it cannot use and says why in two places (src/llama-grammar.cpp):
a syntax error is printed to **stderr** by ``llama_grammar_parser::parse`` ("parse: error parsing
grammar: expecting ::= at <the rest of the text>"), while a missing ``root`` rule, an undefined rule
and left recursion go to llama.cpp's log (:class:`~app.engine.llama_log.LlamaLog`). :func:`grammar_sampler`
captures both while it calls llama.cpp (file descriptor 2 into a temporary file, under a lock: the reader
and main threads may both build one) and turns them into one sentence naming the line.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

from app.core import protocol as P
from app.core.constraint.model import ConstraintKind
from app.engine.errors import EngineError
from app.engine.funnel import TOKEN_DATA, as_cur_p
from app.engine.llama_log import LlamaLog

_STDERR_LOCK = threading.Lock()
GREEDY_TRIES = 64  # candidates a greedy constrained draw tries one by one before the whole chain runs
_PARSE_RE = re.compile(r"error parsing grammar: (.*)", re.S)
_UNDEFINED_RE = re.compile(r"Undefined rule identifier '([^']+)'")
_RULE_RE = re.compile(r"^\s*([a-zA-Z0-9_-]+)\s*::=\s*(.*)$")


def grammar_sampler(vocab: Any, gbnf: str, llama_log: LlamaLog | None) -> Any:
    """llama.cpp's grammar sampler for ``gbnf`` (start rule ``root``) on ``vocab`` (a ``llama_vocab``
    pointer); the caller frees it (``llama_sampler_free``) or hands it to a chain.

    Raises:
        EngineError: ``constraint``, naming the grammar's line and llama.cpp's reason.
    """
    lines: list[str] = []
    with _STDERR_LOCK, tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            if llama_log is not None:
                with llama_log.listening(lambda _level, line: lines.append(line)):
                    smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
            else:
                smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        printed = tmp.read().decode("utf-8", errors="replace")
    if printed:
        sys.stderr.write(printed)  # the engine's stderr keeps what was printed meanwhile (its log)
    if smpl:
        return smpl
    raise EngineError(P.FailureKind.CONSTRAINT, parse_failure(gbnf, printed, lines))


def parse_failure(gbnf: str, printed: str, log_lines: list[str]) -> str:
    """One sentence saying why llama.cpp refused ``gbnf``, the line named when it can be found.

    Args:
        printed: what llama.cpp printed to stderr meanwhile.
        log_lines: what it logged meanwhile.
    """
    m = _PARSE_RE.search(printed)
    if m:
        end = printed.find("\n\n" + gbnf, m.start(1))  # "<reason>\n\n<the grammar>\n"; other threads may print too
        what = printed[m.start(1) : end] if end >= 0 else printed[m.start(1) :].split("\n\n", 1)[0]
        und = _UNDEFINED_RE.search(what)
        if und:
            line = _line_using(gbnf, und.group(1))
            where = f"line {line}: " if line else ""
            return f"The grammar does not parse: {where}the rule '{und.group(1)}' is used but never defined."
        cut = what.find(" at ")
        while cut >= 0:
            rest = what[cut + 4 :]
            if rest and gbnf.endswith(rest):
                offset = len(gbnf) - len(rest)
                line = gbnf.count("\n", 0, offset) + 1
                col = offset - (gbnf.rfind("\n", 0, offset) + 1) + 1
                near = rest.split("\n", 1)[0][:30]
                return f"The grammar does not parse: line {line}, column {col}: {what[:cut]} (at “{near}”)."
            cut = what.find(" at ", cut + 1)
        return f"The grammar does not parse: {what.strip()}."
    logged = " ".join(line.strip() for line in log_lines if "grammar" in line)
    if "does not contain a 'root' symbol" in logged:
        return "The grammar has no rule 'root': llama.cpp starts from 'root ::= ...'."
    if "left recursion" in logged:
        line = _left_recursive_line(gbnf)
        where = f"line {line}: " if line else ""
        return f"The grammar cannot be used: {where}left recursion (a rule that starts with itself), which llama.cpp refuses."
    if logged:
        return f"The grammar cannot be used: {logged}"
    return "The grammar cannot be used: llama.cpp refused it without saying why."


def _line_using(gbnf: str, name: str) -> int:
    """The first line (1-based) whose rule body uses ``name``; 0 when none."""
    word = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
    for i, text in enumerate(gbnf.split("\n"), 1):
        m = _RULE_RE.match(text)
        body = m.group(2) if m else text
        if word.search(re.sub(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]', "", body)):
            return i
    return 0


def _left_recursive_line(gbnf: str) -> int:
    """The line (1-based) of a rule whose body starts with its own name; 0 when none is that plain."""
    for i, text in enumerate(gbnf.split("\n"), 1):
        m = _RULE_RE.match(text)
        if m and re.match(rf"\(?\s*{re.escape(m.group(1))}(?![\w-])", m.group(2)):
            return i
    return 0


def feed(grammar: Any, tokens: list[int] | tuple[int, ...], vocab: Any) -> None:
    """Advance ``grammar`` over ``tokens`` (a reply's tokens before a step, a branch's prefix), each checked
    first: llama.cpp aborts the process when a grammar is made to accept a token it does not allow
    (``llama_grammar_accept_impl``), so each one is applied alone first and refused when cut.

    Args:
        vocab: a :class:`~app.engine.vocab.Vocab` (for the refused token's text).

    Raises:
        EngineError: ``constraint``: a token the grammar does not allow (its position and text named).
    """
    one = (llama_cpp.llama_token_data * 1)()
    for i, t in enumerate(tokens):
        one[0] = llama_cpp.llama_token_data(int(t), 0.0, 0.0)
        cur = llama_cpp.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(cur))
        if not math.isfinite(one[0].logit):
            raise EngineError(
                P.FailureKind.CONSTRAINT,
                f"Token {i + 1} of the reply ({vocab.display(int(t))!r}) does not fit the output format.",
            )
        llama_cpp.llama_sampler_accept(grammar, int(t))


class CheckedDraw:
    """``llama_sampler_sample`` for a chain with a grammar, with one check llama.cpp does not make.

    A grammar that allows no token at a step (every candidate cut: a character class nothing in the
    vocabulary produces, a logit bias banning the only allowed tokens) leaves the draw to pick a token
    the grammar refuses, and ``llama_sampler_accept`` then aborts the engine process
    (``llama_grammar_accept_impl`` throws through C). So a constrained reply draws as
    ``llama_sampler_sample`` does on a CPU context (src/llama-sampler.cpp: the logits row into a
    ``llama_token_data`` array, ``llama_sampler_apply``, the selected entry, ``llama_sampler_accept``),
    with the selected entry checked before it is accepted. Same array, same chain: the same token.

    Greedy (temperature 0, :func:`app.engine.funnel.build_stages`' chain: the grammar, then only stages
    that change logits one token at a time, logit bias, penalties, DRY, then greedy) draws the same token
    without the grammar's pass over the whole vocabulary (30-126 ms a token on Gemma 3's 262k): masking
    first and changing logits after is changing them first and masking after, so the token is the best
    of the changed logits that the grammar allows, the lowest id on a tie as llama.cpp's greedy picks.
    The candidates are tried best first, each alone against the grammar (its verdict on a token does
    not depend on the others: ``llama_grammar_reject_candidates``), among the best :data:`GREEDY_TRIES`;
    when none is allowed there, the whole chain runs as above.

    Args:
        n_vocab: the vocabulary's size (the logits row's length).
        greedy: the chain is a greedy one (``SamplerSettings.is_greedy``).
    """

    def __init__(self, n_vocab: int, greedy: bool = False) -> None:
        self._n = n_vocab
        self._greedy = greedy
        self._arr = np.empty(n_vocab, dtype=TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()
        self.shortcuts = 0  # greedy draws that needed no whole-vocabulary grammar pass (tests read it)

    def __call__(self, chain: Any, ctx: Any, idx: int) -> int:
        """Draw at output row ``idx`` of ``ctx`` (-1: the last) with ``chain``; the chain accepts the token.

        Raises:
            EngineError: ``constraint``: the output format allows no token here.
        """
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, idx), shape=(self._n,))
        if self._greedy:
            token = self._greedy_token(chain, row)
            if token is not None:
                self.shortcuts += 1
                llama_cpp.llama_sampler_accept(chain, token)
                return token
        arr = self._fill(row)
        cur = as_cur_p(arr)
        llama_cpp.llama_sampler_apply(chain, ctypes.byref(cur))
        sel = int(cur.selected)
        if not 0 <= sel < int(cur.size) or not math.isfinite(float(cur.data[sel].logit)):
            raise EngineError(
                P.FailureKind.CONSTRAINT,
                "The output format allows no token at this point of the reply: nothing in the model's "
                "vocabulary can continue it (or the logit bias banned what could). Check the grammar.",
            )
        token = int(cur.data[sel].id)
        llama_cpp.llama_sampler_accept(chain, token)
        return token

    def _fill(self, row: Any) -> Any:
        arr = self._arr
        arr["id"] = self._ids
        arr["logit"] = row
        arr["p"] = 0.0
        return arr

    def _greedy_token(self, chain: Any, row: Any) -> int | None:
        """The greedy chain's token without the grammar's whole-vocabulary pass; None: not found among the
        best :data:`GREEDY_TRIES` (or a stage moved the array: the caller runs the whole chain)."""
        n = int(llama_cpp.llama_sampler_chain_n(chain))
        arr = self._fill(row)
        cur = as_cur_p(arr)
        for i in range(1, n - 1):  # the stages between the grammar (0) and greedy (n - 1)
            llama_cpp.llama_sampler_apply(llama_cpp.llama_sampler_chain_get(chain, i), ctypes.byref(cur))
        moved = int(cur.size) != self._n or ctypes.cast(cur.data, ctypes.c_void_p).value != arr.ctypes.data
        if moved or not np.array_equal(arr["id"], self._ids):  # entry i must still be token i
            return None
        logits = arr["logit"]
        k = min(GREEDY_TRIES, self._n)
        best = np.argpartition(-logits, k - 1)[:k]
        best = best[np.lexsort((best, -logits[best]))]  # best first, the lowest id first on a tie
        grammar = llama_cpp.llama_sampler_chain_get(chain, 0)
        one = self._one
        for t in best.tolist():
            if not math.isfinite(float(logits[t])):
                return None
            one[0] = llama_cpp.llama_token_data(t, float(logits[t]), 0.0)
            single = llama_cpp.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
            llama_cpp.llama_sampler_apply(grammar, ctypes.byref(single))
            if math.isfinite(one[0].logit):
                return int(t)
        return None


def draw_for(req: P.Generate, n_vocab: int) -> Callable[[Any, Any, int], int]:
    """How the decode loops draw for ``req``: :class:`CheckedDraw` with an output constraint (its greedy
    shortcut at temperature 0), else ``llama_sampler_sample`` itself."""
    c = req.constraint
    if c is None or c.kind == ConstraintKind.NONE:
        return llama_cpp.llama_sampler_sample  # type: ignore[no-any-return]
    return CheckedDraw(n_vocab, greedy=req.sampler.is_greedy)
