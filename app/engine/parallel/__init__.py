"""Several local API requests decoded together (issue 23 §4), as llama-server's ``--parallel`` slots.

- :mod:`app.engine.parallel.gate`: the person's own reply first (the API sequences pause while it runs);
- :mod:`app.engine.parallel.sequence`: one request as one sequence (its prompt, sampler chain, tokens, figures);
- :mod:`app.engine.parallel.loop`: the second llama.cpp context and the continuous-batching loop on its thread.
"""
