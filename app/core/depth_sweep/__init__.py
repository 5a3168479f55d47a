"""Speed against context length: prefill and decode tok/s with 0, 512, 1k... tokens already in the KV cache.

The sweep is llama-bench's ``-d`` (tools/llama-bench/llama-bench.cpp) run by the engine on the loaded
model (:mod:`app.engine.depth_sweep`); here, in plain Python: the plan and its figures
(:mod:`.plan`), what the roofline predicts at each depth (:mod:`.roofline`) and the runs kept per
model, llama.cpp build and load settings (:mod:`.store`).
"""
