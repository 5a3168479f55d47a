"""Several local API requests decoded together (issue 23 §4): the events of the engine's parallel
sequences (:mod:`app.engine.parallel`), as llama-server's ``--parallel`` slots; the two requests,
:class:`~app.core.protocol.requests.GenerateParallel` and :class:`~app.core.protocol.requests.CancelSequence`,
are with the others in :mod:`app.core.protocol.requests`.

- :class:`GenerateParallel` runs its :class:`~app.core.protocol.requests.Generate` as one sequence of a
  second llama.cpp context on the loaded model (``n_seq_max = n_seq``), decoded in one ``llama_batch``
  with the other sequences in flight (continuous batching: a request that arrives joins at the next step).
  It is answered as a Generate is: PromptPrepared, TokenBatch events, then one Finished or Failed, all
  with ``request_id``. The person's KV cache and their chat are not touched.
- :class:`CancelSequence` stops one of them (its client went away): it ends with Finished, CANCELLED
  (Failed ``cancelled`` when it was still waiting).
- :class:`SequencesProgressed` is a notice (no request id) at most :data:`PROGRESS_EVERY_S` apart
  while sequences are in flight, and once when the last ends: each sequence's tokens and speed, for
  the Server panel.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: Sequences decoded together at most (the Server panel's range; llama.cpp allows LLAMA_MAX_SEQ = 256).
MAX_SEQUENCES = 16
#: :class:`SequencesProgressed` at most this often while sequences are in flight, seconds.
PROGRESS_EVERY_S = 0.25


class SequenceState(str, enum.Enum):
    """Where one parallel sequence is."""

    WAITING = "waiting"  #: received, no sequence free yet (or the context is being remade)
    PREFILL = "prefill"  #: its prompt is being evaluated, in slices beside the others' decode steps
    DECODING = "decoding"  #: one token per step
    PAUSED = "paused"  #: the person's own reply is being written: every API sequence waits for it


@dataclass(frozen=True)
class SequenceFigures:
    """One sequence in flight.

    Attributes:
        request_id: its request.
        seq_id: its llama.cpp sequence id (0 to n_seq - 1; -1 while waiting).
        state: where it is.
        prompt_tokens: tokens of its prompt; prefilled: how many are evaluated.
        generated: tokens sampled so far.
        decode_tok_s: generated tokens per second of decoding since its first token, the time it was
            paused for the person's reply left out (0 before the second).
    """

    request_id: int
    seq_id: int
    state: SequenceState
    prompt_tokens: int
    prefilled: int
    generated: int
    decode_tok_s: float


@dataclass(frozen=True)
class SequencesProgressed:
    """The parallel sequences now (a notice, no request id).

    Attributes:
        sequences: those in flight and waiting, by sequence id (waiting ones last).
        n_seq: sequences of the parallel context (0: none made yet).
        n_ctx_seq: each sequence's context, tokens.
        kv_bytes: the parallel context's KV cache as llama.cpp reported allocating it, bytes (on top
            of the person's chat context's).
        compute_bytes: its compute buffers as llama.cpp reported them, bytes.
        step_tokens: tokens in the last ``llama_batch`` (decode tokens plus prompt tokens).
        paused: the person's reply holds the model: no sequence advances until it ends.
    """

    sequences: tuple[SequenceFigures, ...]
    n_seq: int
    n_ctx_seq: int
    kv_bytes: int
    compute_bytes: int
    step_tokens: int = 0
    paused: bool = False
