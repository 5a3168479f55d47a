"""UI tests drive the real window (the same wiring as app.main) on a scripted engine host (pytest-qt).

No engine process and no model weights: the window's real EngineClient talks to
:class:`tests.support.scripted_host.ScriptedHost` (through :class:`tests.support.fake_engine.FakeEngine`),
which answers with scripted protocol events. The fixtures (``window`` on the scripted engine, ``tiny_model``)
are :mod:`tests.support.window_fixtures`; the helpers are :mod:`tests.support.window`. What only the real
engine can show lives in tests/ui_model.
"""
