"""Output constraints in the engine (issue 23 §1): a constraint turned into GBNF (:mod:`.grammar`), the GBNF
into llama.cpp's grammar sampler with a parse error's line named (:mod:`.sampler`); the sampler goes first
in the reply's chain and the funnel's stages (:func:`app.engine.funnel.build_stages`)."""
