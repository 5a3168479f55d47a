"""What the local-API benchmarks share (bench/api_load.py, bench/api_embeddings.py): the engine client,
the server and the settings as the window wires them, without a window, with a model loaded and the
server on. Run the Qt event loop while waiting with :func:`bench._window.loop_wait`."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._window import loop_wait


@dataclass
class HeadlessApi:
    """The parts of a running local API: ``engine`` (EngineClient), ``server`` (ServerController),
    ``settings`` (SettingsController); ``url`` and ``key`` to reach it."""

    engine: Any
    server: Any
    settings: Any
    url: str
    key: str
    _tmp: tempfile.TemporaryDirectory[str]

    def close(self) -> None:
        """Stop the server and the engine; delete the settings folder."""
        self.server.shutdown()
        self.engine.shutdown()
        self._tmp.cleanup()


def start_api(model: str, n_ctx: int, **server: Any) -> HeadlessApi:
    """Start the engine, load ``model`` with ``n_ctx`` (up to 120 s), and switch the server on at a free
    port with ``server``'s other ServerSettings fields.

    Raises:
        TimeoutError: the model did not load in 120 s.
        AssertionError: the server did not start (its error in the message).
    """
    from PySide6.QtCore import QCoreApplication

    from app.core.chat.context import LoadSettings
    from app.core.server_settings import ServerSettings
    from app.core.settings import Settings, SettingsStore
    from app.ui.engine.client import EngineClient
    from app.ui.server.controller import ServerController
    from app.ui.window.settings_controller import SettingsController

    QCoreApplication.instance() or QCoreApplication([])
    tmp = tempfile.TemporaryDirectory()
    settings = SettingsController(SettingsStore(Path(tmp.name) / "settings.json"), Settings())
    engine = EngineClient()
    controller = ServerController(engine, settings)
    engine.start()
    engine.load_model(model, LoadSettings(n_ctx=n_ctx))
    loop_wait(lambda: engine.model is not None, 120)
    settings.update(server=ServerSettings(enabled=True, port=0, **server))
    url = controller.url
    assert controller.running and url is not None, controller.error
    return HeadlessApi(engine, controller, settings, url, settings.settings.server.api_key, tmp)
