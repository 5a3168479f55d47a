"""Inspect a token: evaluate a few positions again in a second llama.cpp context, with the eval callback on.

The chat's own context is never touched by an inspection beyond a copy of its KV cache. The
inspect context is created on the same loaded model (read-only, shared), lazily on the first
inspection, with flash attention off (``kq_soft_max-N``, the attention probabilities, exists
only without it: src/llama-graph.cpp ``build_attn_mha``), ``swa_full`` on (so a sliding-window
layer keeps every cell in position order) and the chat's K/V cache types.

The feature's parts, one job each:

- :mod:`~app.engine.inspection.chat_cache`: copying the chat context's KV cache and last logits;
- :mod:`~app.engine.inspection.evaluation`: the inspect context, filled from that copy or by
  re-evaluation, and the evaluation of the span with the eval callback
  (:mod:`~app.engine.inspection.eval_callback`) copying the graph tensors the views read;
- :mod:`~app.engine.inspection.views`: the logit lens, attention, embedding and experts views, pure
  numpy over the captured tensors and the dequantized tables (:mod:`~app.engine.inspection.model_tables`);
- :mod:`~app.engine.inspection.token_inspector`: :class:`TokenInspector`, which runs one inspection
  through those parts (the session calls it on the engine's inspect thread).
"""
