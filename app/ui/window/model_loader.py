"""Loading a model, connecting to a server, reloading and restarting: the one owner of what is
loading and what was asked last.

:class:`ModelLoader` checks a file before the engine sees it, sends the load, and announces every
step as one past-tense signal, :attr:`ModelLoader.model_changed`, whose :class:`ModelChange` says
which step (:class:`~app.ui.window.model_change.ModelPhase`) with what it carries. The top bar, the panels, the Models page,
How it works and the empty chat follow it themselves; nobody else calls the engine's
``load_model``. Load errors and a stopped engine are its notices
(:attr:`NoticeTopic.MODEL`, :attr:`NoticeTopic.ENGINE`).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import QObject, Signal

from app.core import protocol as P
from app.core.chat.context import LoadSettings
from app.core.gguf.gguf_info import GGUFError, MissingSplitParts, check_loadable
from app.core.remote import RemoteEndpoint
from app.ui.common.severity import Severity
from app.ui.engine.client import EngineClient, EngineState
from app.ui.window.model_change import LoadRequest, ModelChange, ModelPhase
from app.ui.window.notices import Notices, NoticeTopic
from app.ui.window.settings_controller import SettingsController


class ModelLoader(QObject):
    """Loads models into the engine and says so.

    Args:
        engine: the engine client the loads go to.
        settings: the settings (load settings read and written, recent models recorded).
        notices: where load errors and a stopped engine are said.
        stop_reply: stops the reply in flight (a load stops it first; the reply is kept).
        choose_file: asks the person for a GGUF file (None: cancelled).
        own_api_url: this Glassbox's local API base URL while it serves, else None.
        parent: the owning QObject.

    Signals:
        model_changed(ModelChange): a load was sent, loaded, failed, was unloaded, or the engine stopped.

    Attributes:
        loading: the load in flight (None when none is).
        asked: the last load asked for (kept after it ends: Reload with other settings asks it again).
    """

    model_changed = Signal(ModelChange)

    def __init__(
        self,
        engine: EngineClient,
        settings: SettingsController,
        notices: Notices,
        *,
        stop_reply: Callable[[], object],
        choose_file: Callable[[], str | None],
        own_api_url: Callable[[], str | None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self._settings = settings
        self._notices = notices
        self._stop_reply = stop_reply
        self._choose_file = choose_file
        self._own_api_url = own_api_url
        self.loading: LoadRequest | None = None
        self.asked: LoadRequest | None = None
        self._restart_loads = False  # a restart loads :attr:`asked` again (not after it failed or crashed)
        engine.model_loaded.connect(self._loaded)
        engine.model_load_failed.connect(self._failed)
        engine.engine_crashed.connect(self._crashed)

    # ------------------------------------------------------------------ commands
    def load_model(self, path: str, settings: LoadSettings | None = None) -> bool:
        """Check ``path`` and load it with ``settings`` (default: the load settings remembered for
        the file, else Glassbox's defaults: :meth:`~app.core.settings.Settings.load_for`).

        Returns:
            False, with a notice, when the file is not a loadable GGUF (or misses split parts).
        """
        try:
            check_loadable(path)
        except MissingSplitParts as exc:
            self._notices.show(NoticeTopic.MODEL, Severity.ERROR, exc.message)
            return False
        except GGUFError as exc:
            self._notices.show(
                NoticeTopic.MODEL, Severity.ERROR, exc.message, [("Open another model…", self.open_model_dialog)]
            )
            return False
        self._stop_reply()  # the reply is kept, with the model it was made with
        key = model_key(path)
        self._send(LoadRequest(key, settings or self._settings.settings.load_for(key), shown=path))
        return True

    def use_remote(self, endpoint: RemoteEndpoint) -> bool:
        """Make a remote OpenAI-compatible server the engine (the Models page's Remote tab).

        Returns:
            False, with a notice, for this Glassbox's own local API (its requests would wait
            behind the very reply they are asked for).
        """
        own = self._own_api_url()
        if own is not None and same_server(endpoint.base_url, own):
            self._notices.show(
                NoticeTopic.MODELS_PAGE,
                Severity.WARNING,
                f"{html.escape(endpoint.base_url)} is this Glassbox's own local API: it can only answer with the "
                "model loaded here. Choose another server, or load the model here.",
            )
            return False
        self._stop_reply()
        shown = endpoint.model or urlsplit(endpoint.base_url).netloc
        key = endpoint.model or endpoint.base_url
        self._send(LoadRequest(key, self._settings.settings.load_for(key), endpoint, shown))
        return True

    def reload_with(self, s: LoadSettings) -> None:
        """Remember ``s`` for the model shown (:attr:`current_path`) and load it again with them (a
        server: connect again, it chose its n_ctx); the last file asked for when none is loaded."""
        self.remember(s)
        if self.engine.remote is not None:
            self.use_remote(self.engine.remote)
            return
        model = self.engine.model
        asked = self.asked if self.asked is not None and self.asked.remote is None else None
        path = model.info.path if model is not None else asked.path if asked is not None else None
        if path:
            self.load_model(path, s)

    def remember(self, s: LoadSettings | None) -> None:
        """Remember ``s`` as the load settings of the model shown (:attr:`current_path`); None, or
        the defaults, forget them (it loads with Glassbox's defaults). No model: nothing is kept."""
        path = self.current_path
        if path is not None:
            self._settings.apply(lambda st: st.with_load_for(path, s))

    def restart_engine(self) -> None:
        """End the engine and start a new one; load the last model again unless loading it failed
        or stopped the engine."""
        self._notices.clear(NoticeTopic.ENGINE)
        self.engine.shutdown()
        self.engine.start()
        if self.asked is not None and self._restart_loads:
            self._send(self.asked)

    def unload_model(self) -> None:
        """End the engine (its memory comes back) and start an empty one."""
        self.engine.shutdown()
        self.engine.start()
        self.loading = None
        self.model_changed.emit(ModelChange(ModelPhase.UNLOADED))

    def open_model_dialog(self) -> None:
        """Ask for a GGUF file and load it."""
        path = self._choose_file()
        if path:
            self.load_model(path)

    # ------------------------------------------------------------------ read-outs
    @property
    def recent_models(self) -> tuple[str, ...]:
        """The models loaded last, newest first (GGUF paths)."""
        return self._settings.settings.recent_models

    @property
    def loaded_path(self) -> str | None:
        """The loaded model's file when it is local (None: no model, or a server)."""
        model = self.engine.model
        return str(Path(model.info.path)) if model is not None and model.remote is None else None

    @property
    def current_path(self) -> str | None:
        """The model the load settings shown are for: the one loading, else the one loaded, else
        the last one asked for (a file's resolved path or a server's model id; None: none yet)."""
        model = self.engine.model
        if self.loading is not None:
            return self.loading.path
        if model is not None:
            return model.info.path
        return self.asked.path if self.asked is not None else None

    @property
    def current_load(self) -> LoadSettings:
        """The load settings of :attr:`current_path`: remembered for it, else Glassbox's defaults."""
        return self._settings.settings.load_for(self.current_path)

    def model_known(self) -> bool:
        """A model is loaded or loading, or a recent one is still on disk."""
        if self.engine.model is not None or self.engine.state == EngineState.LOADING:
            return True
        return any(Path(p).is_file() for p in self.recent_models)

    # ------------------------------------------------------------------ engine answers
    def _send(self, req: LoadRequest) -> None:
        self.loading = self.asked = req
        self._restart_loads = True
        self.model_changed.emit(ModelChange(ModelPhase.LOADING, req))
        if req.remote is None:
            self.engine.load_model(req.path, req.settings)
        else:
            self.engine.load_model(req.path, req.settings, remote=req.remote)
        self._notices.clear(NoticeTopic.MODEL, NoticeTopic.ENGINE)

    def _loaded(self, ev: P.ModelLoaded) -> None:
        req, self.loading = self.loading, None
        asked = req.settings if req is not None else self._settings.settings.load_for(ev.info.path)
        applied = replace(ev.settings, n_threads=asked.n_threads, n_gpu_layers=asked.n_gpu_layers)
        if ev.remote is None:  # a server: no recent file
            self._settings.apply(lambda s: s.with_recent(ev.info.path))
        # Messages about a model that is now loaded.
        self._notices.clear(NoticeTopic.CHAT_MODEL, NoticeTopic.MODEL, NoticeTopic.NO_MODEL, NoticeTopic.MODELS_PAGE)
        self.model_changed.emit(ModelChange(ModelPhase.LOADED, req, ev, applied))

    def _failed(self, ev: P.Failed) -> None:
        req, self.loading = self.loading, None
        self._restart_loads = False  # a restart must not load it again
        self._notices.show(
            NoticeTopic.MODEL, Severity.ERROR, ev.message, [("Open another model…", self.open_model_dialog)]
        )
        self.model_changed.emit(ModelChange(ModelPhase.FAILED, req))

    def _crashed(self, description: str) -> None:
        req, self.loading = self.loading, None
        if req is not None:  # dying while loading: restarting must not load the same file into the same crash
            description = f"{description} It happened while loading {req.path}."
            self._restart_loads = False
        self._notices.show(
            NoticeTopic.ENGINE,
            Severity.ERROR,
            description + " Your conversation is kept.",
            [("Restart engine", self.restart_engine)],
        )
        self.model_changed.emit(ModelChange(ModelPhase.ENGINE_STOPPED, req))


def model_key(path: str) -> str:
    """How a model file is known in the settings (its remembered load settings, its chat template
    override, the recent list): its absolute path with links resolved, as the engine opens it."""
    return str(Path(path).resolve())


def same_server(a: str, b: str) -> bool:
    """Whether two base URLs reach the same port on this machine (127.0.0.1, localhost, ::1 alike)."""
    local = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
    ua, ub = urlsplit(a), urlsplit(b)
    ha, hb = (ua.hostname or "").lower(), (ub.hostname or "").lower()
    return ua.port == ub.port and (ha == hb or (ha in local and hb in local))
