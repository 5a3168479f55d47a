"""Where other local-LLM apps (LM Studio, GPT4All, Jan, llama.cpp) keep their GGUF files on this
computer: the folders the model library offers to add, and whether any holds a model yet.

Only the person adds a folder to the library (:mod:`app.core.models.library`); this module finds
the candidates and looks (read only) for model files in them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from app.core.models.library import is_model_file_name

# Where other local-LLM apps keep their GGUF files, relative to the home folder (Linux, macOS,
# Windows spellings; only those that exist are offered). Ollama is not listed: its blobs are
# GGUF files without the .gguf name, behind its own manifests.
OTHER_APP_FOLDERS: tuple[tuple[str, str], ...] = (
    ("LM Studio", ".lmstudio/models"),
    ("LM Studio", ".cache/lm-studio/models"),
    ("GPT4All", ".local/share/nomic.ai/GPT4All"),
    ("GPT4All", "Library/Application Support/nomic.ai/GPT4All"),
    ("GPT4All", "AppData/Local/nomic.ai/GPT4All"),
    ("Jan", ".local/share/Jan/data/llamacpp/models"),
    ("Jan", "Library/Application Support/Jan/data/llamacpp/models"),
    ("Jan", "AppData/Roaming/Jan/data/llamacpp/models"),
    ("Jan", "jan/models"),
    ("llama.cpp", ".cache/llama.cpp"),  # llama-cli / llama-server -hf downloads (LLAMA_CACHE)
    ("llama.cpp", "Library/Caches/llama.cpp"),
    ("llama.cpp", "AppData/Local/llama.cpp"),
)


def suggested_folders(home: Path | None = None) -> list[Path]:
    """Model folders of other apps (:data:`OTHER_APP_FOLDERS`, and ``$LLAMA_CACHE``) that exist
    on this machine, to offer adding to the library; in the table's order."""
    h = home or Path.home()
    candidates = [h / rel for _app, rel in OTHER_APP_FOLDERS]
    if home is None and os.environ.get("LLAMA_CACHE"):
        candidates.append(Path(os.environ["LLAMA_CACHE"]).expanduser())
    return list(dict.fromkeys(c for c in candidates if c.is_dir()))


def other_app(folder: Path, home: Path | None = None) -> str | None:
    """The app a suggested folder belongs to (``"GPT4All"``), or None."""
    h = home or Path.home()
    for app, rel in OTHER_APP_FOLDERS:
        if folder == h / rel:
            return app
    return None


#: How many folders :func:`has_models` looks in before giving up (a big tree without a model).
MAX_FOLDERS_LOOKED_IN = 2000


def has_models(folder: Path, max_folders: int = MAX_FOLDERS_LOOKED_IN) -> bool:
    """Whether ``folder`` holds a model file (``*.gguf``, not a projector ``mmproj*`` nor a hidden
    file) at any depth, hidden folders skipped. Stops at the first one found, or after looking in
    ``max_folders`` folders (False then). Never raises: an unreadable folder holds nothing."""
    for looked, (_dirpath, dirnames, filenames) in enumerate(os.walk(folder)):
        if looked >= max_folders:
            return False
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if any(is_model_file_name(f) for f in filenames):
            return True
    return False


def folders_with_models(added: Iterable[Path] = (), home: Path | None = None) -> list[Path]:
    """The :func:`suggested_folders` that hold a model (:func:`has_models`) and are not among
    ``added`` (the library's folders already); in the table's order. Reads the disk: call it
    off the UI thread."""
    skip = set(added)
    return [f for f in suggested_folders(home) if f not in skip and has_models(f)]
