"""ModelsWindow: the model library, the Hub browser and the downloads, in one widget.

The composition root (:func:`app.ui.window.compose.build_models_page`) builds the
:class:`~app.core.models.library.ModelLibrary`, the :class:`~app.core.models.downloads.DownloadManager`,
the :class:`~app.core.models.hub.HubClient` factory and the two worker pools, and hands
them to :class:`ModelsWindow`, which owns them from then on: it starts the
manager, builds the Hub client on first use (again when the token changes) and
stops them all in :meth:`ModelsWindow.shutdown`. The main window only connects
its signals and calls :meth:`ModelsWindow.shutdown` when it closes.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from app.core.hardware.fit import SystemMemory, system_memory
from app.core.models.downloads import (
    DownloadError,
    DownloadManager,
    DownloadState,
    DownloadStatus,
    InsufficientSpaceError,
    dest_dir_for,
)
from app.core.models.hub import (
    STARTER_MODELS,
    HubClient,
    HubError,
    HubFile,
    HubOfflineError,
    StarterModel,
    is_offline_mode,
    offline_error,
    scrub,
)
from app.core.models.library import ModelLibrary
from app.core.protocol import DeviceMemory
from app.core.remote import RemoteEndpoint
from app.paths import Paths
from app.ui.common.severity import Severity
from app.ui.common.tasks import TaskPool
from app.ui.engine.host_link import Host
from app.ui.models.downloads_tab import DownloadsTab
from app.ui.models.hub_tab import HubTab
from app.ui.models.library_tab import LibraryTab
from app.ui.models.remote_tab import RemoteTab
from app.ui.quant.quantize_dialog import QuantizeDialog
from app.ui.quant.quantize_open import open_quantize_dialog
from app.ui.window.model_change import ModelChange, ModelPhase
from app.ui.window.settings_controller import SettingsController

log = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096


class ModelsTab(str, enum.Enum):
    """The window's tabs, in their order."""

    LIBRARY = "library"
    HUB = "hub"
    DOWNLOADS = "downloads"
    REMOTE = "remote"

    @property
    def position(self) -> int:
        """The tab's position in the tab bar."""
        return list(ModelsTab).index(self)


class ModelsWindow(QWidget):
    """Find, download and manage GGUF models: Library, Hub and Downloads tabs.

    Creating it and showing the Library tab opens no network connection: the
    library is scanned from disk on a worker thread, and the Hub is contacted
    only when the person searches or downloads (``HF_HUB_OFFLINE`` honoured).
    Downloads interrupted by a quit or a crash resume when it is created.

    Args:
        paths: Glassbox's folders (models go to ``paths.models_dir``).
        settings: the settings' owner (library folders and the Hub token are
            read from it and changed through it).
        library: the model library (used only on ``library_pool``'s thread).
        manager: the download manager, not started yet (this window starts it
            and shuts it down).
        hub_client_factory: builds a :class:`~app.core.models.hub.HubClient` for a token
            (None: anonymous or huggingface_hub's login); called on first use
            and after the token changes.
        library_pool: a one-thread pool for scans, imports and deletes.
        hub_pool: the pool for Hub calls (searches, listings, fit verdicts).
        parent: the parent widget.
        memory: the machine's memory for fit verdicts (e.g. with the GPU's
            VRAM from the engine); None measures RAM at each verdict.

    The window owns ``library``, ``manager`` and the pools once given them:
    :meth:`shutdown` stops them.

    Signals:
        load_requested(str): load this GGUF file (the first part of a split model).
        open_file_requested(): the person asked to open a GGUF file from anywhere.
        notice(Severity, str): how serious and the text, for the window's banner.
        download_finished(str): a model finished downloading (sha256 verified); its path.
        remote_requested(RemoteEndpoint): use this server as the engine (Remote tab).
        compare_requested(Path, Path): compare a model (first) with a quantization made of it (the
            quantize dialog's "Compare with the source").
    """

    load_requested = Signal(str)
    remote_requested = Signal(RemoteEndpoint)
    open_file_requested = Signal()
    notice = Signal(Severity, str)
    download_finished = Signal(str)
    compare_requested = Signal(Path, Path)

    def __init__(
        self,
        paths: Paths,
        settings: SettingsController,
        *,
        library: ModelLibrary,
        manager: DownloadManager,
        hub_client_factory: Callable[[str | None], HubClient],
        library_pool: TaskPool,
        hub_pool: TaskPool,
        parent: QWidget | None = None,
        memory: SystemMemory | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelsWindow")
        self.paths = paths
        self._settings = settings
        self._n_ctx = DEFAULT_N_CTX
        self._memory = memory
        self._vram: tuple[int, int, str] | None = None  # (total, free, device names) from the engine
        self._hub_client_factory = hub_client_factory
        self._hub: HubClient | None = None
        self._closed = False
        self.quantize_hosts: Callable[[], Host] | None = None  # a quantization's engine host (None: a real one)

        self.library = library
        self.manager = manager
        self.library_pool = library_pool
        self.hub_pool = hub_pool
        for pool in (library_pool, hub_pool):
            pool.setParent(self)

        self.library_tab = LibraryTab(self.library, self.library_pool, self._folders, self._store_folders)
        self.hub_tab = HubTab(
            self.hub_client,
            self.hub_pool,
            paths.models_dir,
            lambda: self._n_ctx,
            self.memory_for_verdicts,
            lambda: self._settings.settings.hub_token,
            self._store_token,
        )
        self.downloads_tab = DownloadsTab(self.manager)
        self.remote_tab = RemoteTab(
            self.hub_pool,
            lambda: self._settings.settings.remote,
            lambda r: self._settings.update(remote=r),
        )

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("modelsTabs")
        self.tabs.tabBar().setObjectName("modelsTabBar")
        self.tabs.setDocumentMode(True)
        self.tabs.tabBar().setDrawBase(False)
        self.tabs.addTab(self.library_tab, "Library")
        self.tabs.addTab(self.hub_tab, "Hub")
        self.tabs.addTab(self.downloads_tab, "Downloads")
        self.tabs.addTab(self.remote_tab, "Remote")
        lay.addWidget(self.tabs)

        for tab in (self.library_tab, self.hub_tab, self.downloads_tab):
            tab.notice.connect(self._notice)
            tab.load_requested.connect(self.load_requested)
        self.library_tab.open_file_requested.connect(self.open_file_requested)
        self.remote_tab.use_requested.connect(self.remote_requested)
        self.library_tab.starter_download_requested.connect(self.download_starter)
        self.library_tab.quantize_requested.connect(self.make_quantization)
        self.hub_tab.download_requested.connect(self.download)
        self.downloads_tab.download_finished.connect(self._download_finished)
        self.downloads_tab.statuses_changed.connect(self._sync_download_states)
        self.downloads_tab.active_count_changed.connect(self._active_downloads)

        self.downloads_tab.attach()
        self.manager.start()
        self.library_tab.refresh()
        notices = [n for n in (self.manager.notice,) if n]
        if notices:

            def show_notices() -> None:
                for n in notices:
                    self._notice(Severity.WARNING, n)

            QTimer.singleShot(0, show_notices)

    # --- public API ------------------------------------------------------------------------------
    def refresh_library(self) -> None:
        """Scan the library's sources again (off the UI thread)."""
        if not self._closed:
            self.library_tab.refresh()

    def make_quantization(self, path: str) -> QuantizeDialog | None:
        """Open the "Make a quantization" dialog for the GGUF at ``path`` (results in the models folder); a
        made file is listed and selected, and its "Compare with the source" is :attr:`compare_requested`.
        None (and an error notice naming the file) when the file cannot be read."""
        dialog = open_quantize_dialog(Path(path), self.paths.models_dir, self, self.quantize_hosts)
        if isinstance(dialog, str):
            self._notice(Severity.ERROR, dialog)
            return None
        dialog.quantized.connect(self.library_tab.refresh_and_select)
        dialog.compare_requested.connect(self.compare_requested)
        return dialog

    def set_n_ctx(self, n_ctx: int) -> None:
        """The context length fit verdicts are for (default 4096); the shown files are judged again."""
        n_ctx = int(n_ctx)
        if n_ctx != self._n_ctx:
            self._n_ctx = n_ctx
            self.hub_tab.rejudge()

    @property
    def n_ctx(self) -> int:
        return self._n_ctx

    def set_gpu_devices(self, devices: Sequence[DeviceMemory]) -> None:
        """The GPUs the engine can offload to (``EngineReady.devices``): their free memory joins
        the fit verdicts' budget. Integrated GPUs share the host's RAM and add nothing."""
        discrete = [d for d in devices if not d.integrated]
        if discrete:
            names = ", ".join(d.description or d.name for d in discrete)
            self._vram = (sum(d.total_bytes for d in discrete), sum(d.free_bytes for d in discrete), names)
        else:
            self._vram = None
        self.hub_tab.rejudge()

    def memory_for_verdicts(self) -> SystemMemory | None:
        """What a fit verdict is judged against now: the fixed figures if set, else this machine's
        RAM measured now plus the GPUs' VRAM as the engine reported it; None (measure RAM) on a CPU build."""
        if self._memory is not None or self._vram is None:
            return self._memory
        total, free, names = self._vram
        ram = system_memory()
        return replace(
            ram, vram_total=total, vram_available=free, source=f"{ram.source}; VRAM of {names} from llama.cpp"
        )

    def show_model(self, change: ModelChange) -> None:
        """Follow the loaded model (:attr:`~app.ui.window.model_loader.ModelLoader.model_changed`): a
        local one's row is marked and its n_ctx judges the fits; a server's model or none marks no row."""
        ev = change.loaded
        if change.phase is ModelPhase.LOADED and ev is not None:
            self.set_loaded_model(ev.info.path if ev.remote is None else None)
            if ev.remote is None:
                self.set_n_ctx(ev.n_ctx)
        elif change.phase is ModelPhase.UNLOADED:
            self.set_loaded_model(None)

    def set_loaded_model(self, path: str | None) -> None:
        """Mark the loaded model's row (None: no model loaded) and record its last use."""
        if not self._closed:
            self.library_tab.set_loaded(path)

    def show_tab(self, tab: ModelsTab | str) -> None:
        """Bring a tab to the front (a :class:`ModelsTab` or its value: ``library``, ``hub``, ``downloads``, ``remote``).

        Raises:
            ValueError: no tab has that name.
        """
        self.tabs.setCurrentIndex(ModelsTab(tab).position)

    def shutdown(self) -> None:
        """Stop the downloads (they resume next time), every worker thread and a quantization in flight
        (its dialog closes: the job's process is killed, its ``.part`` removed). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for dialog in self.findChildren(QuantizeDialog):
            dialog.close()
        self.library_tab.cancel_import()
        self.downloads_tab.detach()
        self.manager.shutdown()
        self.hub_pool.shutdown()
        self.library_pool.shutdown()

    # --- the Hub client and the settings -----------------------------------------------------------
    def hub_client(self) -> HubClient:
        """The Hub client (built on first use with the token from the settings, if any)."""
        if self._hub is None:
            self._hub = self._hub_client_factory(self._settings.settings.hub_token)
        return self._hub

    def _store_token(self, token: str | None) -> None:
        self._settings.apply(lambda s: s.with_hub_token(token))
        self._hub = None  # rebuilt with the new token on next use
        self.manager.set_token(token)

    def _folders(self) -> list[Path]:
        return [Path(f) for f in self._settings.settings.library_folders]

    def _store_folders(self, folders: list[Path]) -> None:
        self._settings.apply(lambda s: s.with_library_folders(folders))

    def _notice(self, kind: Severity, text: str) -> None:
        self.notice.emit(kind, scrub(text, self._settings.settings.hub_token))

    # --- downloads ---------------------------------------------------------------------------------
    def download(self, file: HubFile) -> str | None:
        """Queue ``file`` (or resume its paused or failed download); None with a notice when refused.

        Free disk space is checked first (H2): a file larger than the free space
        is refused with both sizes in the notice.
        """
        if self._closed:
            return None
        try:
            dest = dest_dir_for(self.paths.models_dir, file.repo_id).joinpath(*file.filename.split("/"))
            existing = self.downloads_tab.statuses_by_dest().get(str(dest))
            if existing is not None and existing.state in (DownloadState.PAUSED, DownloadState.FAILED):
                self.manager.resume(existing.id)
                return existing.id
            return self.manager.add(file)
        except InsufficientSpaceError as exc:
            self._notice(Severity.ERROR, str(exc))
        except DownloadError as exc:
            self._notice(Severity.WARNING, str(exc))
        return None

    def download_starter(self, starter: StarterModel) -> None:
        """Find a starter model's file on the Hub (worker), then queue its download."""
        if is_offline_mode():
            self._notice(Severity.WARNING, offline_error().message)
            return
        self.library_tab.starters.set_state(starter, "Finding…", False)
        client = self.hub_client()
        self.hub_pool.submit(
            lambda: client.file(starter.repo_id, starter.filename),
            lambda f: self._starter_found(starter, f),
            lambda e: self._starter_failed(starter, e),
        )

    def _starter_found(self, starter: StarterModel, file: HubFile) -> None:
        if self.download(file) is None:
            self.library_tab.starters.set_state(starter, "Download", True)
        else:
            self.library_tab.starters.set_state(starter, "Queued", False)

    def _starter_failed(self, starter: StarterModel, exc: BaseException) -> None:
        self.library_tab.starters.set_state(starter, "Download", True)
        msg = exc.message if isinstance(exc, HubError) else f"{type(exc).__name__}: {exc}"
        self._notice(
            Severity.WARNING if isinstance(exc, HubOfflineError) else Severity.ERROR,
            f"Could not start the download of {starter.filename}: {msg}",
        )

    def _download_finished(self, status: DownloadStatus) -> None:
        self.refresh_library()
        self.download_finished.emit(str(status.path))

    def _sync_download_states(self) -> None:
        by_dest = self.downloads_tab.statuses_by_dest()
        self.hub_tab.set_download_statuses(by_dest)
        for s in STARTER_MODELS:
            try:
                dest = dest_dir_for(self.paths.models_dir, s.repo_id) / s.filename
            except DownloadError:
                continue
            st = by_dest.get(str(dest))
            if st is None:
                continue
            self.library_tab.starters.show_status(s, st)

    def _active_downloads(self, n: int) -> None:
        self.tabs.setTabText(ModelsTab.DOWNLOADS.position, f"Downloads · {n}" if n else "Downloads")


__all__ = ["ModelsTab", "ModelsWindow"]
