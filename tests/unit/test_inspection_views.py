"""The views of "Inspect a token" as pure numpy (app/engine/inspection/views.py), on synthetic tensors and
tables small enough to compute by hand: no model, no llama.cpp evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.core import protocol as P
from app.engine.errors import EngineError
from app.engine.inspection.evaluation import common_prefix, joined
from app.engine.inspection.model_tables import ActivationQuant, ModelTables, NormKind
from app.engine.inspection.views import add_expert_load, attention_maps, embedding_view, experts_view, logit_lens

# A 4-token vocabulary of 2-dimensional embeddings. Every residual row below has both components of
# the same magnitude, so the RMS norm (weight 1, eps 0) makes it (+-1, +-1) exactly.
EMBD = [[2.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, 4.0]]  # row norms 2, 1, sqrt(2), 5
OUTPUT = [[1.0, 0.0], [0.0, 2.0], [3.0, 1.0], [-1.0, 0.0]]


def _tables(*, tied: bool = False, softcap: float = 0.0) -> ModelTables:
    embd = np.array(OUTPUT if tied else EMBD, dtype=np.float16)
    return ModelTables(
        embd=embd,
        embd_norms=np.linalg.norm(embd.astype(np.float32), axis=1).astype(np.float32),
        output=embd if tied else np.array(OUTPUT, dtype=np.float16),
        tied=tied,
        norm_w=np.ones(2, dtype=np.float32),
        norm_b=None,
        norm_kind=NormKind.RMS,
        eps=0.0,
        softcap=softcap,
        act_quant=ActivationQuant.NONE,
        embd_scale=1.0,
        build_s=0.0,
    )


def _text(token: int) -> str:
    return f"t{token}"


def _softmax(logits: list[float]) -> list[float]:
    z = sum(math.exp(v) for v in logits)
    return [math.exp(v) / z for v in logits]


# The context holds tokens 0, 1, 2; the span is positions 0 and 1; position 1 is inspected.
TOKENS = (0, 1, 2)
LENS_TENSORS = {
    # layer 0: position 0 -> (1, 1), position 1 -> (1, -1); layer 1: (-1, 1), then (1, 1)
    "l_out-0": np.array([[1.0, 1.0], [2.0, -2.0]], dtype=np.float32),
    "l_out-1": np.array([[-3.0, 3.0], [5.0, 5.0]], dtype=np.float32),
    "result_norm": np.array([[0.0, 0.0], [3.0, 4.0]], dtype=np.float32),
}


def _lens(tables: ModelTables, **kw):
    args = dict(
        tokens=TOKENS,
        pos=1,
        c0=0,
        c1=1,
        n_layer=2,
        n_embd=2,
        top_k=2,
        llama_logits=np.array([1.0, 2.0, 4.0, -0.5], dtype=np.float32),
        display=_text,
    )
    args.update(kw)
    return logit_lens(LENS_TENSORS, tables, **args)


def test_the_lens_is_each_layers_state_through_the_norm_and_the_head():
    lens, hidden_cos, emb_cos = _lens(_tables(), chat_logits=np.array([1.0, 2.0, 3.75, -1.0], dtype=np.float32))
    # OUTPUT @ (1, 1) = (1, 2, 4, -1); @ (1, -1) = (1, -2, 2, -1); @ (-1, 1) = (-1, 2, -2, 1).
    grid = [[[1, 2, 4, -1], [1, -2, 2, -1]], [[-1, 2, -2, 1], [1, 2, 4, -1]]]
    next_tokens = [1, 2]  # the token after position 0, then after position 1
    want_top = [[[2, 1], [2, 0]], [[1, 3], [2, 1]]]
    want_rank = [[2, 1], [1, 1]]
    assert lens.positions == (0, 1)
    assert lens.tokens == ((0, "t0"), (1, "t1"))
    assert lens.next_tokens == ((1, "t1"), (2, "t2"))
    for il in range(2):
        for j in range(2):
            cell = lens.cells[il][j]
            probs = _softmax(grid[il][j])
            assert [i for i, _t, _p in cell.top] == want_top[il][j]
            assert [t for _i, t, _p in cell.top] == [f"t{i}" for i in want_top[il][j]]
            assert [p for _i, _t, p in cell.top] == pytest.approx([probs[i] for i in want_top[il][j]], rel=1e-5)
            assert cell.next_rank == want_rank[il][j]
            assert cell.next_p == pytest.approx(probs[next_tokens[j]], rel=1e-5)
    # The self-check: the last layer at the inspected position, (1, 2, 4, -1), against llama.cpp's.
    assert lens.last_layer_max_abs_diff == pytest.approx(0.5)
    assert lens.logit_range == pytest.approx(4.5)
    assert lens.chat_max_abs_diff == pytest.approx(0.25)
    assert lens.contexts_max_abs_diff == pytest.approx(0.5)
    assert (lens.tied, lens.softcap) == (False, 0.0)
    # Cosines with the embedding rows (norms 2, 1, sqrt 2, 5): of token 1's row (0, 1) and of the
    # final hidden state (3, 4).
    assert emb_cos == pytest.approx([0.0, 1.0, 1 / math.sqrt(2), 0.8], abs=1e-6)
    assert hidden_cos == pytest.approx([0.6, 0.8, 7 / (5 * math.sqrt(2)), 1.0], abs=1e-6)


def test_the_lens_without_chat_logits_compares_nothing_more():
    lens, _h, _e = _lens(_tables())
    assert lens.chat_max_abs_diff is None and lens.contexts_max_abs_diff is None
    # A position past the context's end has no next token: rank and probability 0.
    lens, _h, _e = _lens(_tables(), tokens=(0, 1), top_k=1)
    assert lens.next_tokens[1] == (-1, "")
    assert (lens.cells[0][1].next_rank, lens.cells[0][1].next_p) == (0, 0.0)
    assert [i for i, _t, _p in lens.cells[0][1].top] == [2]


def test_a_tied_softcapped_lens_reads_the_one_table():
    """Tied: the embedding table is the head, and one product gives the logits and both cosines."""
    lens, hidden_cos, emb_cos = _lens(_tables(tied=True, softcap=2.0))
    raw = [[[1, 2, 4, -1], [1, -2, 2, -1]], [[-1, 2, -2, 1], [1, 2, 4, -1]]]
    for il in range(2):
        for j in range(2):
            capped = [2.0 * math.tanh(v / 2.0) for v in raw[il][j]]
            probs = _softmax(capped)
            cell = lens.cells[il][j]
            assert [p for _i, _t, p in cell.top] == pytest.approx(sorted(probs, reverse=True)[:2], rel=1e-5)
    assert lens.tied and lens.softcap == 2.0
    capped_last = [2.0 * math.tanh(v / 2.0) for v in raw[1][1]]
    want = max(abs(a - b) for a, b in zip(capped_last, [1.0, 2.0, 4.0, -0.5], strict=True))
    assert lens.last_layer_max_abs_diff == pytest.approx(want, rel=1e-5)
    # Rows (1, 0), (0, 2), (3, 1), (-1, 0): norms 1, 2, sqrt 10, 1. Token 1's row is (0, 2).
    assert emb_cos == pytest.approx([0.0, 1.0, 1 / math.sqrt(10), 0.0], abs=1e-6)
    assert hidden_cos == pytest.approx([0.6, 0.8, 13 / (5 * math.sqrt(10)), -0.6], abs=1e-6)


def test_attention_reads_the_inspected_row_up_to_its_position():
    # Two layers, two query heads sharing one KV head; the span is positions 1 and 2, position 2 inspected
    # (row 1); four KV cells, of which cells 0..2 are positions 0..2.
    kq0 = np.zeros((1, 2, 2, 4), dtype=np.float32)
    kq0[0, 0, 1] = [0.5, 0.25, 0.25, 0.0]
    kq0[0, 1, 1] = [0.2, 0.3, 0.4, 0.1]  # 0.1 on a cell after the position: the row sums to 0.9
    kq0[0, :, 0] = 9.0  # the other row of the span is not read
    kq1 = np.zeros((2, 2, 4), dtype=np.float32)  # no leading 1
    kq1[0, 1] = [1.0, 0.0, 0.0, 0.0]
    kq1[1, 1] = [0.0, 0.0, 1.0, 0.0]
    att = attention_maps(
        {"kq_soft_max-0": kq0, "kq_soft_max-1": kq1},
        tokens=(5, 6, 7, 8),
        pos=2,
        c0=1,
        n_layer=2,
        n_head=2,
        n_head_kv=1,
        sliding=(True, False),
        sliding_window=512,
        display=_text,
    )
    weights = np.frombuffer(att.weights, dtype=np.float32)  # [n_layer, n_head, pos + 1], row-major
    assert weights.tolist() == pytest.approx([0.5, 0.25, 0.25, 0.2, 0.3, 0.4, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    assert att.key_positions == (0, 3) and (att.n_layer, att.n_head) == (2, 2)
    assert att.row_sum_max_error == pytest.approx(0.1, abs=1e-6)
    assert att.head_kv == (0, 0)
    assert att.sliding == (True, False) and att.window == 512
    assert att.key_texts == ("t5", "t6", "t7")


def test_attention_without_sliding_layers_has_no_window_and_a_missing_layer_fails():
    kq = np.full((1, 1, 1), 1.0, dtype=np.float32)
    att = attention_maps(
        {"kq_soft_max-0": kq},
        tokens=(3,),
        pos=0,
        c0=0,
        n_layer=1,
        n_head=1,
        n_head_kv=1,
        sliding=(False,),
        sliding_window=4096,
        display=_text,
    )
    assert att.window == 0 and att.row_sum_max_error == 0.0
    with pytest.raises(EngineError) as err:
        attention_maps(
            {"kq_soft_max-0": kq},
            tokens=(3,),
            pos=0,
            c0=0,
            n_layer=2,
            n_head=1,
            n_head_kv=1,
            sliding=(False, False),
            sliding_window=0,
            display=_text,
        )
    assert err.value.kind is P.FailureKind.INTERNAL and "kq_soft_max-1" in err.value.message


def test_the_embedding_view_lists_the_nearest_rows_but_the_token_itself():
    tables = _tables()
    emb_cos = np.array([0.0, 1.0, 1 / math.sqrt(2), 0.8], dtype=np.float32)
    hidden_cos = np.array([0.6, 0.8, 0.99, 1.0], dtype=np.float32)
    view = embedding_view(tables, 1, emb_cos, hidden_cos, 2, _text)
    assert list(np.frombuffer(view.vector, dtype=np.float32)) == [0.0, 1.0]
    assert view.norm == pytest.approx(1.0) and view.scale == 1.0
    assert [(i, t) for i, t, _s in view.neighbours] == [(3, "t3"), (2, "t2")]  # token 1 itself left out
    assert [s for _i, _t, s in view.neighbours] == pytest.approx([0.8, 1 / math.sqrt(2)])
    assert [i for i, _t, _s in view.hidden_neighbours] == [3, 2]
    assert view.table_bytes == tables.n_bytes == 4 * 2 * 2 * 2 + 4 * 4 + 2 * 4  # embd, output (f16), norms, norm_w
    assert emb_cos[1] == 1.0  # the caller's array is not changed


def test_experts_read_the_router_by_weight_and_the_load_as_shares():
    # One MoE layer (0) and one dense layer (1, no router); 4 experts, 2 used per token.
    first = {"ffn_moe_topk-0": np.array([[0, 3]], dtype=np.int32)}  # the turn's position before the span
    span = {
        "ffn_moe_topk-0": np.array([[0, 3], [2, 1]], dtype=np.int32),
        # The layer mixes with the normalised weights: they win over the raw softmax.
        "ffn_moe_weights_norm-0": np.array([[[0.7], [0.3]], [[0.25], [0.75]]], dtype=np.float32),
        "ffn_moe_weights-0": np.array([[0.1, 0.2], [0.9, 0.05]], dtype=np.float32),
    }
    counts = np.zeros((2, 4), dtype=np.float32)
    add_expert_load(first, counts)
    add_expert_load(span, counts)
    assert counts.tolist() == [[2, 1, 1, 2], [0, 0, 0, 0]]
    view = experts_view(span, n_layer=2, n_expert=4, n_expert_used=2, row=1, counts=counts, n_tokens=3)
    assert len(view.chosen) == 1  # the dense layer has no choice
    assert view.chosen[0].experts == (1, 2)  # by weight: 0.75, then 0.25
    assert view.chosen[0].weights == pytest.approx((0.75, 0.25))
    load = np.frombuffer(view.load, dtype=np.float32)  # [1 MoE layer, n_expert]
    assert load.tolist() == pytest.approx([2 / 3, 1 / 3, 1 / 3, 2 / 3])
    assert load.sum() == pytest.approx(2.0)  # each token chose n_expert_used experts
    assert (view.n_expert, view.n_expert_used, view.load_tokens) == (4, 2, 3)


def test_a_router_without_weights_keeps_its_order_with_zero_weights():
    view = experts_view(
        {"ffn_moe_topk-0": np.array([[3, 1]], dtype=np.int32)},
        n_layer=1,
        n_expert=4,
        n_expert_used=2,
        row=0,
        counts=np.array([[0, 1, 0, 1]], dtype=np.float32),
        n_tokens=1,
    )
    assert view.chosen[0].experts == (3, 1) and view.chosen[0].weights == (0.0, 0.0)


def test_two_evaluations_join_row_by_row_but_attention_is_the_last_ones():
    neighbours = {
        "l_out-0": np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32),
        "kq_soft_max-0": np.zeros((2, 2, 3), dtype=np.float32),
    }
    alone = {
        "l_out-0": np.array([[5.0, 6.0]], dtype=np.float32),
        "kq_soft_max-0": np.ones((2, 1, 3), dtype=np.float32),
        "result_norm": np.array([[7.0, 8.0]], dtype=np.float32),
    }
    out = joined(neighbours, alone, 2)
    assert out["l_out-0"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert out["kq_soft_max-0"] is alone["kq_soft_max-0"]
    assert out["result_norm"].tolist() == [[7, 8]]  # nothing of it in the first evaluation
    assert common_prefix((1, 2, 3), (1, 2, 4, 5)) == 2
    assert common_prefix((), (1,)) == 0 and common_prefix((1, 2), (1, 2)) == 2
