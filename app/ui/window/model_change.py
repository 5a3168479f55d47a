"""What :attr:`ModelLoader.model_changed <app.ui.window.model_loader.ModelLoader.model_changed>`
carries: the step of a model's life and what comes with it. Plain data (no Qt), so whatever
follows the loaded model (the top bar, the panels, the Models page) imports it without the loader.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.remote import RemoteEndpoint


class ModelPhase(str, enum.Enum):
    """Which step of a model's life a :class:`ModelChange` reports."""

    LOADING = "loading"  # a load (or a connection to a server) was sent
    LOADED = "loaded"  # it loaded: the engine answers with it
    FAILED = "failed"  # it could not be loaded (the notice says why)
    UNLOADED = "unloaded"  # the person unloaded it
    ENGINE_STOPPED = "engine-stopped"  # the engine died or was ended (the notice offers a restart)


@dataclass(frozen=True)
class LoadRequest:
    """A load asked for.

    Attributes:
        path: the GGUF file, resolved (what the engine opens); for a server, its model id (or its
            base URL when it names none).
        settings: the load settings sent.
        remote: the server the engine becomes; None for this machine's engine.
        shown: what the person chose, as shown while it loads (the file as given, or the server's
            model, or its host when it names none).
    """

    path: str
    settings: LoadSettings
    remote: RemoteEndpoint | None = None
    shown: str = ""


@dataclass(frozen=True)
class ModelChange:
    """The payload of :attr:`ModelLoader.model_changed`.

    Attributes:
        phase: the step.
        request: the load it is about (LOADING, LOADED, FAILED; None otherwise, or for a model
            loaded before this loader asked for anything).
        loaded: the engine's answer (LOADED only).
        applied: the load settings it was loaded with, as the person asked them: n_threads and
            n_gpu_layers stay "auto" / "all" where the engine reports the numbers it resolved
            (LOADED only).
    """

    phase: ModelPhase
    request: LoadRequest | None = None
    loaded: P.ModelLoaded | None = None
    applied: LoadSettings | None = None
