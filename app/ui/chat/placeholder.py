"""What the empty chat view says: the loaded model and what the panels show, a loading notice,
or, with no model, links to load one (recent and library models first)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from app.core import protocol as P
from app.core.gguf.gguf_info import SPLIT_RE, format_bytes
from app.ui.common import palette
from app.ui.window.pages import Page

# The placeholder's links: open a file, show the models page, or load:<path>.
OPEN_LINK = "open"
MODELS_LINK = Page.MODELS.value
LOAD_LINK_PREFIX = "load:"
HINT_DONE_LINK = "first-turn-hint:done"  # "Don't show this again" under the first turn's hint
QUICK_SHOWN = 4  # models on disk offered as one-click links


def display_name(path: str) -> str:
    """A model's name for the window: its file name without .gguf (and the split suffix)."""
    name = Path(path).name
    split = SPLIT_RE.match(name)  # the split-file naming the library and llama.cpp use
    if split:
        return split["stem"]
    return name[:-5] if name.lower().endswith(".gguf") else name


FIRST_TURN_HINT = (
    "<b>Your first turn:</b> send a message. As the reply streams, the Tokens panel colours each token "
    "by how likely the model thought it: green likely, red unlikely. Then click a red token to see in the "
    "Funnel how each sampler stage narrowed the choice, and move a Sampler slider (temperature, top_p, "
    "min_p) to watch that token's odds change. View → Sampling lab puts the three side by side."
)


def placeholder_html(
    *,
    has_chat: bool,
    model: P.ModelLoaded | None,
    loading: bool,
    quick_models: Sequence[str] = (),
    first_turn_hint: bool = False,
) -> str:
    """The empty view's rich text: "" when a chat is shown; else the model's facts, "Loading…",
    or how to get a model: the first :data:`QUICK_SHOWN` of ``quick_models`` (GGUF paths,
    best first: the caller passes recent models, then the library's as last scanned; no
    disk access here, it runs on the UI thread) as load links. ``first_turn_hint``: with a model
    loaded, :data:`FIRST_TURN_HINT` and a "Don't show this again" link (:data:`HINT_DONE_LINK`)."""
    if has_chat:
        return ""
    if model is not None:
        info = model.info
        return (
            f"<h2>{html.escape(display_name(info.path))}</h2><p style='color:{palette.MUTED}'>{info.architecture} · "
            f"{info.quant_type} · {format_bytes(info.file_size)} · n_ctx {model.n_ctx:,}</p>"
            "<p>Ask anything. The panels show each step: the prompt's tokens, prefill, the KV cache, "
            "time to first token, the decode loop and the sampler.</p>"
            + (
                f"<p style='color:{palette.MUTED}'>{FIRST_TURN_HINT} <a href='{HINT_DONE_LINK}'>Don't show this "
                "again</a></p>"
                if first_turn_hint
                else ""
            )
        )
    if loading:
        return "<h2>Loading the model…</h2>"
    quick = "".join(
        f"<p><a href='{LOAD_LINK_PREFIX}{html.escape(p)}'>Load {html.escape(display_name(p))}</a></p>"
        for p in list(dict.fromkeys(quick_models))[:QUICK_SHOWN]
    )
    return (
        "<h2>No model loaded</h2>"
        + quick
        + f"<p><a href='{OPEN_LINK}'>Open a GGUF file</a> (Ctrl+O), drop one on this "
        f"window, or <a href='{MODELS_LINK}'>download a small starter model or find one on the Hugging Face "
        "Hub</a> (the Models page says which fit this computer).</p>"
    )
