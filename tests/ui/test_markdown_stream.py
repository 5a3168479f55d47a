"""Streaming Markdown: a repaint costs what is new, and the end result equals a one-shot render.

The documents are the benchmark's (bench/stream_render.py): a growing table, a fenced
code block, a nested list, LaTeX-heavy prose; plus a long block quote.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest
from PySide6.QtWidgets import QApplication, QLabel

from app.ui.chat import highlight, markdown
from app.ui.chat.markdown import SegmentKind, StreamingDocument
from app.ui.chat.markdown_view import CodeBlock, MarkdownView
from app.ui.chat.message import MessageWidget
from bench.stream_render import code_doc, latex_doc, list_doc, table_doc, tokens_of


def quote_doc(n: int) -> str:
    return (
        "Quoted:\n\n"
        + "\n>\n".join(f"> paragraph {i} of the quote, with *emphasis* and `code`." for i in range(n))
        + "\n"
    )


DOCS = {
    "table": table_doc(60),
    "code": code_doc(120),
    "list": list_doc(200),
    "latex": latex_doc(12),
    "quote": quote_doc(30),
    "mixed": table_doc(20) + "\n" + code_doc(40) + "\nAfter the code.\n\n" + list_doc(20) + "\n" + quote_doc(9),
}


def streamed(text: str) -> tuple[list, StreamingDocument]:
    doc = StreamingDocument()
    acc = ""
    tail: list = []
    for piece in tokens_of(text):
        acc += piece
        _new, tail = doc.update(acc, streaming=True)
    _new, tail = doc.update(acc)  # the reply is over
    return doc.final + tail, doc


@pytest.mark.parametrize("kind", sorted(DOCS))
def test_a_streamed_reply_ends_as_a_one_shot_render(kind):
    text = DOCS[kind]
    one_shot = StreamingDocument()
    new, tail = one_shot.update(text)
    whole = new + tail
    by_token, _doc = streamed(text)
    assert [(s.kind, s.source, s.html, s.code, s.cont, s.list_cut) for s in by_token] == [
        (s.kind, s.source, s.html, s.code, s.cont, s.list_cut) for s in whole
    ]
    # Nothing is lost or doubled: the segments' sources are the text's lines.
    assert sum(s.source.count("\n") + 1 for s in whole) <= text.count("\n") + 1
    assert "".join(s.source for s in whole).replace("\n", "") in text.replace("\n", "") or kind != "table"


@pytest.mark.parametrize("kind", ["table", "code", "list", "quote"])
def test_every_block_kind_is_cut_so_the_tail_stays_small(kind):
    """The open (re-rendered) segment never grows past a chunk, however long the block."""
    text = DOCS[kind]
    doc = StreamingDocument()
    acc = ""
    biggest = 0
    for piece in tokens_of(text):
        acc += piece
        _new, tail = doc.update(acc, streaming=True)
        biggest = max(biggest, max((s.source.count("\n") + 1 for s in tail), default=0))
    limit = {
        "table": markdown.TABLE_CHUNK + 2,
        "code": highlight.CODE_CHUNK,
        "list": markdown.LIST_LINES + 4,  # a cut at the first top-level item after LIST_LINES lines
        "quote": 2 * markdown.QUOTE_CHUNK + 1,
    }[kind]
    assert biggest <= limit, (kind, biggest)
    assert len(doc.final) >= 3


def test_a_cut_table_keeps_its_header_once_and_its_columns_in_line():
    rows = 2 * markdown.TABLE_CHUNK + 5
    new, tail = StreamingDocument().update(table_doc(rows))
    tables = [s for s in new + tail if "<table" in s.html]
    assert len(tables) == 3 and [s.cont for s in tables] == [False, True, True]
    assert len(re.findall(r"<th[ >]", tables[0].html)) == 5 and all("<th" not in s.html for s in tables[1:])
    widths = [re.findall(r'width="(\d+)%"', s.html)[:5] for s in tables]
    assert len(widths[0]) == 5 and widths[0] == widths[1] == widths[2]
    assert sum(s.html.count("<tr>") for s in tables) == rows + 1  # the header row and the body rows
    small = StreamingDocument().update(table_doc(5))
    assert 'width="' not in (small[0] + small[1])[-1].html  # a short table keeps its natural widths


def _count_lexing(monkeypatch) -> list[str]:
    """Record every chunk Pygments lexes (a fresh cache of :func:`highlight.highlight_from`)."""
    calls: list[str] = []
    raw = highlight.highlight_from.__wrapped__

    def counting(state, chunk: str, language: str):
        calls.append(chunk)
        return raw(state, chunk, language)

    cached = lru_cache(maxsize=1024)(counting)
    monkeypatch.setattr(highlight, "highlight_from", cached)
    monkeypatch.setattr(markdown, "highlight_from", cached)
    return calls


def test_a_finished_code_chunk_is_not_highlighted_again(monkeypatch):
    """Pygments runs once per finished chunk (the cache keeps it), and never on more than a chunk."""
    calls = _count_lexing(monkeypatch)
    _segs, doc = streamed(code_doc(100))
    code = [s for s in doc.final if s.kind is SegmentKind.CODE]
    assert len(code) >= 3
    for seg in code:  # each final chunk was highlighted in its final form once
        assert calls.count(seg.source) == 1
    longest = max(len(c.split("\n")) for c in calls)
    assert longest <= highlight.CODE_CHUNK


def test_a_streaming_code_block_is_lexed_once_per_line_not_once_per_token(monkeypatch):
    """The line being written is shown plain; Pygments runs when a line ends (and once more per chunk
    at the end), so a repaint in the middle of a line costs no lexing."""
    calls = _count_lexing(monkeypatch)
    text = code_doc(100)
    tokens = list(tokens_of(text))
    segs, _doc = streamed(text)
    n_lines = text.count("\n")
    assert len(tokens) > 3 * n_lines  # several tokens per line: lexing per token would show
    assert len(calls) <= n_lines + len(segs) + 2
    once = StreamingDocument().update(text)
    assert [s.html for s in segs] == [s.html for s in once[0] + once[1]]  # the end result is fully coloured


def test_the_line_being_written_shows_plain_until_the_next_begins():
    doc = StreamingDocument()
    _new, tail = doc.update("```python\nx = 1\nimport o", streaming=True)
    coloured = re.compile(r"<span[^>]*>import</span>")
    assert tail[-1].html.endswith("\nimport o</pre>") and not coloured.search(tail[-1].html)
    assert "<span" in tail[-1].html  # the finished line is coloured
    _new, tail = doc.update("```python\nx = 1\nimport os\ny", streaming=True)
    assert coloured.search(tail[-1].html)  # "import" got its colour once the next line began


def _char_styles(body: str) -> list[tuple[str, str]]:
    """Each visible character of highlighted HTML with its inline style (spans may be cut differently)."""
    import html as html_mod

    out = []
    body = re.sub(r"</?pre[^>]*>", "", body)
    for m in re.finditer(r'<span style="([^"]*)">([^<]*)</span>|([^<]+)', body):
        style, text = (m.group(1), m.group(2)) if m.group(1) is not None else ("", m.group(3))
        out += [(c, style) for c in html_mod.unescape(text) if not c.isspace()]
    return out


def test_a_docstring_across_a_chunk_boundary_keeps_its_colour():
    lines = ["x = 1"] * (highlight.CODE_CHUNK - 2) + ['"""a docstring', "over", "several", "lines", '"""', "y = 2"]
    code = "\n".join(lines)
    chunks = highlight.code_chunks(code, "python")
    second = highlight.highlight_chunk(*chunks[1], "python")
    whole = highlight.highlight_chunk(highlight.ROOT, code, "python")
    string_style = whole.split("a docstring")[0].rsplit("<span", 1)[1]
    assert second.startswith("<span" + string_style.split(">")[0])  # "several" is coloured as a string


@pytest.mark.parametrize("doc_lines", [20, 60])
def test_a_docstring_longer_than_several_chunks_keeps_its_colours_and_the_code_after_it(doc_lines):
    """Each chunk is lexed from the state the one before ended in: a 20- or 60-line docstring (more
    than any fixed number of context lines) and the code after it are coloured as when the block is
    lexed whole, streamed or rendered at once."""
    body = "\n".join(f"    doc line {i} with 12 numbers and 'quotes'" for i in range(doc_lines))
    code = f'def f():\n    """{body}\n    """\n    return 1\n\n\ndef g(x):\n    return x * 2\n'
    whole = _char_styles(highlight.highlight_chunk(highlight.ROOT, code.rstrip("\n"), "python"))
    assert _char_styles(markdown.render_code(code.rstrip("\n"), "python")) == whole
    segs, _doc = streamed(f"Code:\n\n```python\n{code}```\n")
    shown = "\n".join(s.html for s in segs if s.kind is SegmentKind.CODE)
    assert _char_styles(shown) == whole
    styles = dict(whole[-12:])  # "return x * 2": "return" is a keyword, not a string
    string_style = dict(_char_styles(highlight.highlight_chunk(highlight.ROOT, '"""s"""', "python")))["s"]
    assert styles["r"] != string_style


def test_the_view_joins_code_chunks_in_one_block_and_copy_gives_the_whole_code(qtbot):
    view = MarkdownView()
    qtbot.addWidget(view)
    text = code_doc(80)
    acc = ""
    for piece in tokens_of(text):
        acc += piece
        view.set_markdown(acc)
    blocks = view.findChildren(CodeBlock)
    assert len(blocks) == 1
    expected = text.split("```python\n", 1)[1].rsplit("\n```", 1)[0]
    assert blocks[0].code == expected
    assert blocks[0].chunk_count() == -(-len(expected.split("\n")) // highlight.CODE_CHUNK)
    fresh = MarkdownView()
    qtbot.addWidget(fresh)
    fresh.set_markdown(text)
    (other,) = fresh.findChildren(CodeBlock)
    assert [c.text() for c in other._chunks] == [c.text() for c in blocks[0]._chunks]


def test_a_streaming_table_shows_whole_rows_and_the_last_row_once_the_reply_ends(qtbot):
    w = MessageWidget("assistant")
    qtbot.addWidget(w)
    w.set_streaming(True)
    w.set_text("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | fo")
    w.refresh()
    shown = "".join(lbl.text() for lbl in w.body.findChildren(QLabel))
    assert "<td>2</td>" in shown and "<td>fo" not in shown  # the row being written waits for its line end
    w.set_text("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | four |")
    w.refresh()
    w.set_streaming(False)  # the reply ended without a newline: its last row is shown
    shown = "".join(lbl.text() for lbl in w.body.findChildren(QLabel))
    assert "<td>four</td>" in shown


def test_a_code_block_shows_all_its_lines(qtbot):
    from PySide6.QtWidgets import QApplication

    from app.ui.theme import apply_theme

    apply_theme(QApplication.instance())
    view = MarkdownView()
    qtbot.addWidget(view)
    view.resize(700, 400)
    long = "x" * 300  # wider than the view: the horizontal scroll bar shows
    view.set_markdown("```python\n" + "\n".join(f'line_{i} = "{long}"' for i in range(40)) + "\n```")
    view.show()
    qtbot.waitExposed(view)
    (block,) = view.findChildren(CodeBlock)
    assert block.code_scroll.horizontalScrollBar().isVisible()
    assert block.code_scroll.viewport().height() >= block.body.sizeHint().height()


def test_warm_up_loads_the_common_code_lexers_on_a_background_thread():
    import threading

    from app.ui.chat import highlight

    highlight._warm.clear()  # as in a fresh process: nothing loaded yet
    highlight._lexer.cache_clear()
    highlight.highlight_from.cache_clear()
    highlight.warm_up()
    assert highlight._warm and highlight._warm[0] is not threading.current_thread()
    highlight._warm[0].join(60)
    assert not highlight._warm[0].is_alive()
    before = highlight.highlight_from.cache_info().hits
    for language in highlight.WARM_LANGUAGES:
        highlight.highlight_chunk(highlight.ROOT, "x = 1", language)
    # every language was loaded and highlighted already: the UI thread finds them ready
    assert highlight.highlight_from.cache_info().hits - before == len(highlight.WARM_LANGUAGES)


def test_the_reply_end_does_not_measure_the_reply_again(qtbot):
    """Showing Continue, Edit... at a reply's end changed the message's minimum width (the header
    row's), and the layout measured every label of the reply again at that width: 130-240 ms
    on the UI thread for a 2,500-token table (Esc 'settled' up to 0.5 s)."""
    from app.ui.chat import markdown_view as message_mod
    from app.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.resize(760, 600)
    view.show()
    qtbot.waitExposed(view)
    w = view.add_message("assistant", "", message_id=1)
    w.set_streaming(True)
    rows = "\n".join(f"| {i} | alpha beta | {i * 37 % 1000}.5 | `gamma` |" for i in range(1, 121))
    w.set_text("Here is the table.\n\n| # | Name | Value | Note |\n|---:|---|---:|---|\n" + rows + "\n")
    w.refresh()
    w.set_streaming(False)
    qtbot.waitUntil(view.verticalScrollBar().isVisible)  # laid out, the scroll bar shown
    QApplication.processEvents()
    labels = w.findChildren(message_mod.RichLabel)
    assert len(labels) > 10
    before = w.minimumSizeHint().width()
    cached = {id(label): set(label._heights) for label in labels}
    w.set_badge("stopped")
    w.set_can_continue(True)
    w.set_footer("120 tokens · 30 tok/s")
    QApplication.processEvents()
    assert w.continue_btn.isVisible()
    assert w.minimumSizeHint().width() == before
    # no label was laid out at a width it had not been measured at before (RichLabel caches per width)
    new = [(sorted(cached[id(label)]), sorted(set(label._heights) - cached[id(label)])) for label in labels]
    assert all(not n for _, n in new), new


@pytest.mark.parametrize("kind", ["table", "list"])
def test_a_finished_segment_keeps_the_widget_that_showed_it_while_streaming(qtbot, kind):
    """When the tail segment is finished, its widget stays (no second label laid out for the same
    rows): a streamed reply creates one label per segment, not two."""
    view = MarkdownView()
    qtbot.addWidget(view)
    text = {"table": table_doc(60), "list": list_doc(120)}[kind]
    seen: set[int] = set()
    alive = []  # keep every label referenced, so that ids are not reused
    acc = ""
    for piece in tokens_of(text):
        acc += piece
        view.set_markdown(acc, streaming=True)
        for label in view.findChildren(QLabel):
            if id(label) not in seen:
                seen.add(id(label))
                alive.append(label)
    view.set_markdown(acc)
    final = view.findChildren(QLabel)
    assert len(final) >= 5
    assert len(seen) <= len(final) + 1


def test_a_block_quote_has_a_bar_and_nested_quotes_nest_it():
    html = markdown.render_text("> outer\n>\n> > inner\n\nafter")
    assert "<blockquote>" not in html  # Qt draws no border on it
    assert html.count(f"background-color:{markdown.palette.QUOTE_BAR}") == 2  # one bar per level
    assert html.index("outer") < html.index("inner") < html.index("after")
    assert html.count("<table") == html.count("</table>") == 2


def test_a_long_list_cut_in_chunks_keeps_its_spacing_across_the_cuts(qtbot):
    """A long list is shown as chunks of LIST_CHUNK items; across a cut the items keep the spacing
    they have inside a chunk: the chunks are joined (no gap, no list margins at the cut), so the
    whole list is as tall as the same list in one label."""
    from app.ui.chat.markdown import TEXT_CSS
    from app.ui.chat.markdown_view import rich_label as _rich_label
    from app.ui.theme import apply_theme

    apply_theme(QApplication.instance())
    n = 3 * markdown.LIST_CHUNK
    text = "".join(f"- item {i} alpha beta\n" for i in range(n))
    segs, _doc = streamed(text)
    k = len(segs)
    assert k >= 3  # cut every LIST_CHUNK items or LIST_LINES lines
    assert [s.cont for s in segs] == [False] + [True] * (k - 1)
    assert [s.list_cut for s in segs] == [True] * (k - 1) + [False]
    view = MarkdownView()
    qtbot.addWidget(view)
    view.set_markdown(text)
    one = _rich_label(f"<style>{TEXT_CSS}</style>{markdown.render_text(text)}")  # as the view makes its labels
    qtbot.addWidget(one)
    one.ensurePolished()  # the theme's font, as the view's labels get it in its layout
    width = 600
    assert abs(view.heightForWidth(width) - one.heightForWidth(width)) <= 3
