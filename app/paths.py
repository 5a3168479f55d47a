"""Where Glassbox keeps its files: one module over platformdirs.

Every path the app writes comes from :class:`Paths`. Setting ``GLASSBOX_HOME``
puts all of them under one folder (tests use it so they never touch a real
profile; a portable install can use it too).

Layout::

    <data>/models/                  GGUF files Glassbox downloaded or imported (Hub downloads
                                    under <owner>/<repo>/, with .part files while in flight)
    <data>/conversations.sqlite3    chats (app.core.conversations)
    <data>/downloads.json           the download queue, so downloads resume after a restart
    <data>/logs/                    app.log, engine.log
    <config>/settings.json          user settings (app.core.settings)
    <cache>/library-headers.json    GGUF facts of the library's files, by path, size and mtime
    <cache>/bandwidth.json          this machine's measured memory bandwidth (app.core.hardware.bandwidth)

On POSIX these folders are 0o700 and the chats, settings and logs 0o600 (user only).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_DIR_NAME = "Glassbox"
FOLDER_MODE = 0o700  # Glassbox's folders: the user's only (POSIX)
HOME_ENV = "GLASSBOX_HOME"


@dataclass(frozen=True)
class Paths:
    """The folders Glassbox uses. Create them with :meth:`ensure`."""

    data_dir: Path
    config_dir: Path
    cache_dir: Path

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def conversations_db(self) -> Path:
        return self.data_dir / "conversations.sqlite3"

    def ensure(self) -> Paths:
        """Create every folder (idempotent), readable by the user only. Returns self.

        On POSIX each of Glassbox's own folders gets mode :data:`FOLDER_MODE` (0o700),
        folders made by an older Glassbox included: chats, settings (the Hub token)
        and logs are nobody else's business. A folder whose mode cannot be changed
        (another owner) is used as it is.

        Raises:
            OSError: a folder cannot be created; the message names it.
        """
        for d in (self.data_dir, self.config_dir, self.cache_dir, self.models_dir, self.logs_dir):
            try:
                d.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
            except OSError as exc:
                raise OSError(f"Glassbox cannot create its folder {d}: {exc.strerror or exc}") from exc
            if os.name == "posix":
                with contextlib.suppress(OSError):
                    d.chmod(FOLDER_MODE)
        return self


def default_paths(environ: os._Environ[str] | dict[str, str] | None = None) -> Paths:
    """The paths for this user, honouring ``GLASSBOX_HOME``.

    With ``GLASSBOX_HOME=/some/dir`` everything lives in ``/some/dir/{data,config,cache}``;
    otherwise platformdirs gives the platform's usual folders
    (``~/.local/share/Glassbox``, ``~/Library/Application Support/Glassbox``,
    ``%LOCALAPPDATA%\\Glassbox``...).
    """
    env = os.environ if environ is None else environ
    home = env.get(HOME_ENV)
    if home:
        root = Path(home).expanduser()
        return Paths(root / "data", root / "config", root / "cache")
    return Paths(
        Path(platformdirs.user_data_dir(APP_DIR_NAME, appauthor=False)),
        Path(platformdirs.user_config_dir(APP_DIR_NAME, appauthor=False)),
        Path(platformdirs.user_cache_dir(APP_DIR_NAME, appauthor=False)),
    )
