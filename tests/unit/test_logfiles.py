"""Logging and private files: one logger tree (``app``), --debug, rotation, and modes 0o700 / 0o600.

The modes are POSIX permissions; Windows keeps a profile private by its ACLs.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import logfiles
from app.cli import parse_args
from app.core.settings import Settings, SettingsStore
from app.paths import FOLDER_MODE, Paths, default_paths
from app.ui.window.compose import open_conversations

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def configured(tmp_path: Path) -> Iterator[tuple[Path, list[logfiles.LogSetup]]]:
    setups: list[logfiles.LogSetup] = []
    try:
        yield tmp_path / "app.log", setups
    finally:
        for setup in setups:
            setup.close()


def _text(path: Path) -> str:
    for handler in logging.getLogger().handlers:
        handler.flush()
    return path.read_text(encoding="utf-8")


def test_app_loggers_log_info_and_other_libraries_only_warnings(configured) -> None:
    path, setups = configured
    setups.append(logfiles.configure(path))
    logging.getLogger("app.core.models.hub").info("hub info line")
    logging.getLogger("app.core.models.hub").debug("hub debug line")
    logging.getLogger("httpx").info("HTTP Request: GET /api/models?search=what+the+person+typed")
    logging.getLogger("huggingface_hub.utils").warning("third-party warning")
    text = _text(path)
    assert "INFO app.core.models.hub: hub info line" in text
    assert "hub debug line" not in text
    assert "what+the+person+typed" not in text  # third-party INFO (request URLs) stays out
    assert "WARNING huggingface_hub.utils: third-party warning" in text


def test_debug_logs_debug_lines_to_the_file_and_stderr(configured, capsys: pytest.CaptureFixture[str]) -> None:
    path, setups = configured
    setups.append(logfiles.configure(path, debug=True, stderr=True))
    logging.getLogger("app.ui.window.main_window").debug("a debug detail")
    assert "DEBUG app.ui.window.main_window: a debug detail" in _text(path)
    assert "DEBUG app.ui.window.main_window: a debug detail" in capsys.readouterr().err


def test_close_puts_the_levels_and_handlers_back(configured) -> None:
    path, _setups = configured
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger("app").level)
    setup = logfiles.configure(path, debug=True)
    assert logging.getLogger("app").level == logging.DEBUG and root.level == logging.WARNING
    setup.close()
    assert (list(root.handlers), root.level, logging.getLogger("app").level) == before


def test_debug_reaches_the_engine_process_through_its_environment(configured, monkeypatch, capsys) -> None:
    from app.engine import process

    monkeypatch.delenv(logfiles.DEBUG_ENV, raising=False)
    path, _setups = configured
    setup = logfiles.configure(path, debug=True)
    assert os.environ[logfiles.DEBUG_ENV] == "1"  # what the spawned engine process inherits
    setup.close()
    assert logfiles.DEBUG_ENV not in os.environ  # closing puts it back
    # In the engine process (here without a log file: it logs to stderr) at DEBUG when the
    # window was started with --debug, at INFO otherwise.
    root_before = list(logging.getLogger().handlers)
    try:
        process._setup_logging(None)
        logging.getLogger("app.engine.decode").debug("not in debug mode")
        monkeypatch.setenv(logfiles.DEBUG_ENV, "1")
        process._setup_logging(None)
        logging.getLogger("app.engine.decode").debug("an engine debug detail")
        err = capsys.readouterr().err
        assert "DEBUG app.engine.decode: an engine debug detail" in err
        assert "not in debug mode" not in err
    finally:
        for h in logging.getLogger().handlers[:]:
            if h not in root_before:
                logging.getLogger().removeHandler(h)
                h.close()
        logging.getLogger("app").setLevel(logging.NOTSET)


def test_the_debug_flag() -> None:
    assert parse_args(["--debug"]).debug is True
    assert parse_args([]).debug is False


def test_log_files_rotate_and_keep_three_copies(tmp_path: Path) -> None:
    assert (logfiles.MAX_BYTES, logfiles.BACKUPS) == (2 * 1024 * 1024, 3)
    path = tmp_path / "engine.log"
    handler = logfiles.PrivateRotatingFileHandler(path, max_bytes=300, backups=3)
    logger = logging.getLogger("app.test.rotation")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        for i in range(60):
            logger.info("line %02d %s", i, "x" * 40)
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.propagate = True
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["engine.log", "engine.log.1", "engine.log.2", "engine.log.3"]
    assert all(p.stat().st_size <= 300 for p in tmp_path.iterdir())
    assert "line 59" in path.read_text(encoding="utf-8")


@posix_only
def test_log_files_are_the_users_only_after_a_rotation_and_when_made_earlier(tmp_path: Path) -> None:
    old = tmp_path / "app.log"
    old.write_text("from an older Glassbox\n")
    old.chmod(0o644)
    (tmp_path / "app.log.1").write_text("older\n")
    (tmp_path / "app.log.1").chmod(0o644)
    handler = logfiles.PrivateRotatingFileHandler(old, max_bytes=100, backups=2)
    try:
        assert _mode(old) == 0o600 and _mode(tmp_path / "app.log.1") == 0o600
        for i in range(10):
            handler.emit(logging.LogRecord("app", logging.INFO, __file__, 1, "message %d" + "y" * 40, (i,), None))
    finally:
        handler.close()
    assert (tmp_path / "app.log.2").exists()
    assert {p.name: _mode(p) for p in tmp_path.iterdir()} == dict.fromkeys(["app.log", "app.log.1", "app.log.2"], 0o600)


@posix_only
def test_the_folders_are_the_users_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    paths = default_paths()
    paths.data_dir.mkdir(parents=True)
    paths.data_dir.chmod(0o755)  # made by an older Glassbox
    paths.ensure()
    for d in (paths.data_dir, paths.config_dir, paths.cache_dir, paths.models_dir, paths.logs_dir):
        assert _mode(d) == FOLDER_MODE == 0o700, d


@posix_only
def test_settings_and_the_chat_history_are_the_users_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLASSBOX_HOME", str(tmp_path / "home"))
    old_umask = os.umask(0o022)  # the usual umask: files 0o644 unless made private
    try:
        paths: Paths = default_paths().ensure()
        SettingsStore(paths.settings_file).save(Settings())
        store, notice = open_conversations(paths)
        try:
            store.add_message(store.create_conversation(), None, "user", "hello")
        finally:
            store.close()
    finally:
        os.umask(old_umask)
    assert notice is None  # the real history, not the fallback
    assert _mode(paths.settings_file) == 0o600
    assert _mode(paths.conversations_db) == 0o600
    companions = [p for p in paths.data_dir.iterdir() if p.name.startswith("conversations.sqlite3-")]
    assert all(_mode(p) == 0o600 for p in companions), companions
