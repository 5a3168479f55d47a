"""User settings that survive a restart, in one JSON file written atomically.

A damaged settings file is moved aside (``settings.json.damaged-<time>``) and
defaults are used; :attr:`SettingsStore.notice` says so, so the UI can tell the
person. Nothing is half-written: saves go to a temporary file that replaces the
old one in one step (``os.replace``).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.core.chat.chat_settings import ChatSettings, clean_stop_strings
from app.core.chat.context import LoadSettings
from app.core.mcp.config import McpSettings
from app.core.remote import RemoteSettings
from app.core.sampling.alternatives import DEFAULT_PER_TOKEN, MAX_PER_TOKEN, TokenColour
from app.core.sampling.params import SamplerSettings
from app.core.server_settings import ServerSettings

MAX_RECENT = 12
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
SETTINGS_VERSION = 3
# Version 1 kept these two in an untyped ``extra`` dict under these keys.
_V1_FOLDERS_KEY = "library.folders"
_V1_TOKEN_KEY = "hub.token"


class DialogFolder(str, enum.Enum):
    """The kinds of file dialog whose last folder is remembered (one folder per kind)."""

    OPEN_MODEL = "open_model"  # File → Open model
    EXPORT = "export"  # Export chat
    IMPORT = "import"  # Import chat

    @property
    def field_name(self) -> str:
        """The :class:`Settings` field that holds this kind's folder."""
        return f"{self.value}_folder"


class Workspace(str, enum.Enum):
    """The window's dock layouts (perspectives), each remembered as the person left it."""

    CHAT = "chat"  # chat-first: Chats and Model left, Stats / Funnel and Sampler right, Tokens below
    SAMPLING = "sampling"  # the sampling lab: Sampler, Funnel and Tokens side by side at a readable size


@dataclass(frozen=True)
class Settings:
    """Everything remembered between runs.

    Attributes:
        sampler: the sampler settings of new chats (a chat keeps its own: :mod:`app.core.chat.chat_settings`).
        system_prompt: the system message of new chats.
        stop_strings: the extra stop strings of new chats.
        recent_models: most recent first, absolute paths.
        window_geometry: Qt's saveGeometry, base64.
        window_state, sampling_state: Qt's saveState of the Chat layout's and the Sampling lab's docks,
            base64 ("": not left yet, laid out as at first).
        workspace: the layout shown when the window was last closed.
        first_turn_hint: the empty chat walks the first turn ("send a message, then click a red token")
            until the person says not to show it again.
        library_folders: folders the person added to the model library, as typed
            (``~`` expanded), deduplicated, in the order added.
        hub_token: the Hugging Face token entered in Glassbox (stripped), or None.
            Stored in settings.json in plain text, as huggingface_hub stores its
            own login token; never logged or shown by Glassbox.
        open_model_folder, export_folder, import_folder: the folder the last Open model,
            Export chat and Import chat dialog was used in ("" before the first use);
            see :class:`DialogFolder`.
        server: the local API server (off by default; its key is stored here like the Hub token).
        model_load: the load settings remembered per model file (n_ctx, n_gpu_layers, threads, flash
            attention, K / V cache types...), ``(model path, LoadSettings)`` pairs, keyed like
            ``chat_templates``; a file not listed loads with Glassbox's defaults (``LoadSettings()``):
            see :meth:`load_for`. A file moved or renamed is another file (its entry stays, unused).
            Files written before version 3 kept one ``load`` for every model: it becomes the
            remembered settings of each file in ``recent_models`` (the files it was used with), so
            they load as before, and a file opened for the first time gets the defaults.
        chat_templates: the person's chat template overrides, ``(model path, Jinja2 source)``
            pairs, one per model (absolute paths as loaded); a model not listed uses its GGUF's.
            Stored as a JSON object; files written before it existed read as none.
        remote: the remote engine set up in the Models page (URL, model, key stored like the Hub token).
        alternatives_per_token: candidates each reply keeps per generated token (1 to
            :data:`~app.core.sampling.alternatives.MAX_PER_TOKEN`), :mod:`app.core.sampling.alternatives`.
        token_colour: what a token's colour shows in the chat's token view and the Tokens panel.
        mcp: the MCP servers set up in Tools → MCP servers, and the tools switched off
            (:mod:`app.core.mcp.config`); a stdio server's environment variables are stored here in
            plain text, like the Hub token.
    """

    sampler: SamplerSettings = field(default_factory=SamplerSettings)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    recent_models: tuple[str, ...] = ()
    window_geometry: str = ""
    window_state: str = ""
    sampling_state: str = ""
    workspace: Workspace = Workspace.CHAT
    first_turn_hint: bool = True
    library_folders: tuple[str, ...] = ()
    hub_token: str | None = None
    open_model_folder: str = ""
    export_folder: str = ""
    import_folder: str = ""
    server: ServerSettings = field(default_factory=ServerSettings)
    chat_templates: tuple[tuple[str, str], ...] = ()

    def chat_template_for(self, model_path: str) -> str | None:
        """The person's chat template for the model at ``model_path``, or None (the GGUF's is used)."""
        return dict(self.chat_templates).get(model_path)

    def with_chat_template(self, model_path: str, source: str | None) -> Settings:
        """These settings with ``model_path``'s chat template override set (None: back to the GGUF's)."""
        rest = tuple((p, t) for p, t in self.chat_templates if p != model_path)
        return replace(self, chat_templates=rest + (((model_path, source),) if source is not None else ()))

    model_load: tuple[tuple[str, LoadSettings], ...] = ()

    def remembered_load(self, model_path: str | None) -> LoadSettings | None:
        """The load settings remembered for ``model_path`` (None: none, it loads with the defaults)."""
        return dict(self.model_load).get(model_path) if model_path else None

    def load_for(self, model_path: str | None) -> LoadSettings:
        """What ``model_path`` loads with: its remembered load settings, else Glassbox's defaults
        (``LoadSettings()``, never another model's). None (no model) gives the defaults."""
        return self.remembered_load(model_path) or LoadSettings()

    def with_load_for(self, model_path: str, load: LoadSettings | None) -> Settings:
        """These settings with ``load`` remembered for ``model_path``; None, or settings equal to the
        defaults, forget it (the file loads with the defaults and is shown as such)."""
        rest = tuple((p, s) for p, s in self.model_load if p != model_path)
        if load is not None and load != LoadSettings():
            rest += ((model_path, load),)
        return replace(self, model_load=rest)

    remote: RemoteSettings = field(default_factory=RemoteSettings)
    alternatives_per_token: int = DEFAULT_PER_TOKEN
    token_colour: TokenColour = TokenColour.PROBABILITY
    stop_strings: tuple[str, ...] = ()
    mcp: McpSettings = field(default_factory=McpSettings)

    @property
    def new_chat(self) -> ChatSettings:
        """What a new chat starts with (the defaults)."""
        return ChatSettings(self.sampler, self.system_prompt, self.stop_strings)

    def with_new_chat(self, defaults: ChatSettings) -> Settings:
        """These settings with ``defaults`` as what new chats start with."""
        return replace(
            self, sampler=defaults.sampler, system_prompt=defaults.system_prompt, stop_strings=defaults.stop_strings
        )

    def dock_state(self, workspace: Workspace) -> str:
        """The dock state saved for ``workspace`` ("" if none yet)."""
        return self.sampling_state if workspace is Workspace.SAMPLING else self.window_state

    def with_dock_state(self, workspace: Workspace, state: str) -> Settings:
        """These settings with ``workspace``'s dock state set."""
        if workspace is Workspace.SAMPLING:
            return replace(self, sampling_state=state)
        return replace(self, window_state=state)

    def last_folder(self, kind: DialogFolder) -> str:
        """The folder the last dialog of ``kind`` was used in ("" if none yet)."""
        kind = DialogFolder(kind)
        if kind is DialogFolder.OPEN_MODEL:
            return self.open_model_folder
        return self.export_folder if kind is DialogFolder.EXPORT else self.import_folder

    def with_last_folder(self, kind: DialogFolder, folder: Path | str) -> Settings:
        """These settings with ``kind``'s last folder set to ``folder`` (``~`` expanded)."""
        value = str(Path(folder).expanduser()) if str(folder) else ""
        kind = DialogFolder(kind)
        if kind is DialogFolder.OPEN_MODEL:
            return replace(self, open_model_folder=value)
        if kind is DialogFolder.EXPORT:
            return replace(self, export_folder=value)
        return replace(self, import_folder=value)

    def with_recent(self, model_path: str) -> Settings:
        """Put ``model_path`` first in the recent list (deduplicated, capped)."""
        p = str(Path(model_path).resolve()) if model_path else model_path
        rest = [r for r in self.recent_models if r != p]
        return replace(self, recent_models=tuple([p, *rest][:MAX_RECENT]))

    def with_library_folders(self, folders: Iterable[Path | str]) -> Settings:
        """These settings with the library's added folders replaced (``~`` expanded, deduplicated, order kept)."""
        return replace(self, library_folders=_folders(folders))

    def with_hub_token(self, token: str | None) -> Settings:
        """These settings with the Hub token set (None or blank removes it)."""
        return replace(self, hub_token=_token(token))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SETTINGS_VERSION,
            "sampler": self.sampler.to_dict(),
            "system_prompt": self.system_prompt,
            "stop_strings": list(self.stop_strings),
            "recent_models": list(self.recent_models),
            "window_geometry": self.window_geometry,
            "window_state": self.window_state,
            "sampling_state": self.sampling_state,
            "workspace": Workspace(self.workspace).value,
            "first_turn_hint": self.first_turn_hint,
            "library_folders": list(self.library_folders),
            "hub_token": self.hub_token,
            **{k.field_name: self.last_folder(k) for k in DialogFolder},
            "server": self.server.to_dict(),
            "chat_templates": dict(self.chat_templates),
            "model_load": {p: s.to_dict() for p, s in self.model_load},
            "remote": self.remote.to_dict(),
            "alternatives_per_token": self.alternatives_per_token,
            "token_colour": TokenColour(self.token_colour).value,
            "mcp": self.mcp.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        """Settings from a parsed settings file of any version (1 and 2 are migrated); bad fields get defaults."""
        recent = data.get("recent_models") or []
        recent_models = tuple(str(r) for r in recent if isinstance(r, str))[:MAX_RECENT]
        raw_extra = data.get("extra")
        extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
        folders = data.get("library_folders", extra.get(_V1_FOLDERS_KEY))
        token = data.get("hub_token", extra.get(_V1_TOKEN_KEY))
        return cls(
            sampler=SamplerSettings.from_dict(data.get("sampler")),
            system_prompt=str(data.get("system_prompt", DEFAULT_SYSTEM_PROMPT)),
            stop_strings=clean_stop_strings(data.get("stop_strings")),
            recent_models=recent_models,
            window_geometry=str(data.get("window_geometry", "")),
            window_state=str(data.get("window_state", "")),
            sampling_state=_text(data.get("sampling_state")),
            workspace=Workspace.SAMPLING if data.get("workspace") == Workspace.SAMPLING.value else Workspace.CHAT,
            first_turn_hint=data.get("first_turn_hint") is not False,
            library_folders=_folders(f for f in folders if isinstance(f, str)) if isinstance(folders, list) else (),
            hub_token=_token(token if isinstance(token, str) else None),
            open_model_folder=_text(data.get(DialogFolder.OPEN_MODEL.field_name)),
            export_folder=_text(data.get(DialogFolder.EXPORT.field_name)),
            import_folder=_text(data.get(DialogFolder.IMPORT.field_name)),
            server=ServerSettings.from_dict(data.get("server")),
            chat_templates=_templates(data.get("chat_templates")),
            model_load=_model_load(data, recent_models),
            remote=RemoteSettings.from_dict(data.get("remote")),
            alternatives_per_token=_per_token(data.get("alternatives_per_token")),
            token_colour=TokenColour.ENTROPY
            if data.get("token_colour") == TokenColour.ENTROPY.value
            else TokenColour.PROBABILITY,
            mcp=McpSettings.from_dict(data.get("mcp")),
        )


def _folders(folders: Iterable[Path | str]) -> tuple[str, ...]:
    seen: list[str] = []
    for f in folders:
        if not str(f):
            continue
        s = str(Path(f).expanduser())
        if s not in seen:
            seen.append(s)
    return tuple(seen)


def _templates(value: object) -> tuple[tuple[str, str], ...]:
    """Chat template overrides from the stored object: pairs of text kept, anything else dropped."""
    if not isinstance(value, dict):
        return ()
    return tuple((p, t) for p, t in value.items() if isinstance(p, str) and p and isinstance(t, str))


def _model_load(data: dict[str, Any], recent: tuple[str, ...]) -> tuple[tuple[str, LoadSettings], ...]:
    """The per-file load settings: ``model_load`` (version 3; an entry not an object is dropped, bad
    fields read as :meth:`LoadSettings.from_dict` reads them), else a version 1-2 file's one ``load``
    remembered for each of its recent models (nothing when it was the defaults)."""
    stored = data.get("model_load")
    if isinstance(stored, dict):
        out: tuple[tuple[str, LoadSettings], ...] = ()
        for path, value in stored.items():
            load = LoadSettings.from_dict(value) if isinstance(path, str) and path and isinstance(value, dict) else None
            if load is not None and load != LoadSettings():
                out += ((path, load),)
        return out
    legacy = data.get("load")
    old = LoadSettings.from_dict(legacy if isinstance(legacy, dict) else None)
    return () if old == LoadSettings() else tuple((p, old) for p in recent)


def _per_token(value: object) -> int:
    """A stored alternatives-per-token count, clamped to 1..MAX_PER_TOKEN (the default when not a whole number)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return DEFAULT_PER_TOKEN
    return max(1, min(MAX_PER_TOKEN, value))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _token(token: str | None) -> str | None:
    return token.strip() if token and token.strip() else None


class SettingsStore:
    """Loads and saves :class:`Settings` at one path.

    Attributes:
        notice: set after :meth:`load` when the file was damaged and set aside.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.notice: str | None = None

    def load(self) -> Settings:
        """Read the settings; defaults when the file is missing or damaged."""
        self.notice = None
        try:
            raw_bytes = self.path.read_bytes()
        except FileNotFoundError:
            return Settings()
        except OSError as exc:
            self.notice = f"Could not read the settings file {self.path} ({exc.strerror or exc}); using defaults."
            return Settings()
        try:
            data = json.loads(raw_bytes.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return Settings.from_dict(data)
        except (ValueError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            if isinstance(exc, UnicodeDecodeError):
                exc = ValueError("it is not text")
            aside = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
            try:
                os.replace(self.path, aside)
                where = f"it was moved to {aside}"
            except OSError:
                where = "it could not be moved aside"
            self.notice = f"The settings file {self.path} was damaged ({exc}); {where}. Defaults are in use."
            return Settings()

    def save(self, settings: Settings) -> None:
        """Write atomically (temp file + os.replace).

        Raises:
            OSError: the folder is not writable; the message names the file.
        """
        atomic_write_text(self.path, json.dumps(settings.to_dict(), indent=2, ensure_ascii=False))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new file, never half.

    Raises:
        OSError: with the path in the message.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(exc.errno, f"could not write {path}: {exc.strerror or exc}") from exc
