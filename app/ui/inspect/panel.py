"""The "Inspect a token" window: logit lens, attention, embedding and experts of one context position.

Shows a :class:`~app.core.inspection.token_inspection.TokenInspection` (computed by the engine in a second
llama.cpp context, :mod:`app.engine.inspection`) in four tabs. Heatmaps are drawn with QPainter
from a QImage (:class:`Heatmap`); colours come from :mod:`app.ui.common.palette`.
"""

from __future__ import annotations

import html

import numpy as np
import numpy.typing as npt
from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import (
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.gguf.architecture import attention_label
from app.core.gguf.gguf_facts import format_bytes
from app.core.inspection.token_inspection import MAX_EXPERT_SPAN, AttentionMaps, InspectPath, TokenInspection
from app.ui.common import palette
from app.ui.common.token_label import quoted, visible, visible_html

CAUSATION_NOTE = (
    "Attention weights are not an explanation of causation: they show where this position read from, "
    "not why the model predicted what it did."
)
HINT = "Click a token in the Tokens panel to inspect it."  # the header before any inspection
MAX_KEY_COLUMNS = 400  # attention columns drawn; more positions are binned (each column sums a run of positions)


def bin_columns(w: npt.NDArray[np.float32], limit: int = MAX_KEY_COLUMNS) -> tuple[npt.NDArray[np.float32], int]:
    """``w`` [..., n] summed over runs of ``k`` consecutive positions so that at most ``limit`` columns
    remain (every position still counted: the first token, the sliding window's edge stay visible).

    Returns:
        ``(binned [..., ceil(n / k)], k)``; ``k`` is 1 when ``n <= limit``.
    """
    n = w.shape[-1]
    k = max(1, -(-n // limit))
    if k == 1:
        return w, 1
    pad = (-n) % k
    padded = np.concatenate([w, np.zeros((*w.shape[:-1], pad), dtype=w.dtype)], axis=-1) if pad else w
    return padded.reshape(*w.shape[:-1], -1, k).sum(axis=-1), k


def _rgb(hex_color: str) -> tuple[int, int, int]:
    c = QColor(hex_color)
    return c.red(), c.green(), c.blue()


def ramp(values: npt.NDArray[np.float32], lo: str = palette.PLOT_BG, hi: str = palette.AMBER) -> npt.NDArray[np.uint8]:
    """RGB [..., 3] for values in [0, 1] between two palette colours."""
    v = np.clip(np.nan_to_num(values.astype(np.float32)), 0.0, 1.0)[..., None]
    a = np.asarray(_rgb(lo), dtype=np.float32)
    b = np.asarray(_rgb(hi), dtype=np.float32)
    out: npt.NDArray[np.uint8] = (a + (b - a) * v).astype(np.uint8)
    return out


def diverging(values: npt.NDArray[np.float32]) -> npt.NDArray[np.uint8]:
    """RGB for signed values: blue below 0, red above, scaled by the largest magnitude."""
    m = float(np.abs(values).max()) or 1.0
    pos = ramp(np.clip(values / m, 0, 1), palette.PLOT_BG, palette.RED).astype(np.int32)
    neg = ramp(np.clip(-values / m, 0, 1), palette.PLOT_BG, palette.ACCENT).astype(np.int32)
    base = np.asarray(_rgb(palette.PLOT_BG), dtype=np.int32)
    out: npt.NDArray[np.uint8] = np.clip(pos + neg - base, 0, 255).astype(np.uint8)
    return out


class Heatmap(QWidget):
    """A matrix of RGB cells, scaled to the widget, with optional row labels on the left and
    column labels (the token strip) underneath, as many as fit.

    Args:
        min_row_px: the least height of one row, pixels (the widget's minimum height follows).
    """

    def __init__(self, min_row_px: int = 10, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._img: QImage | None = None
        self._buf: npt.NDArray[np.uint8] = np.zeros((1, 1, 3), dtype=np.uint8)
        self._labels: list[str] = []
        self._label_colors: list[str] = []
        self._min_row_px = min_row_px
        self._label_w = 0
        self._cols: list[str] = []
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_rgb(
        self,
        rgb: npt.NDArray[np.uint8],
        labels: list[str] | None = None,
        colors: list[str] | None = None,
        columns: list[str] | None = None,
    ) -> None:
        """Show ``rgb`` [rows, cols, 3]; ``labels`` one per row (``colors`` theirs), ``columns`` one per column."""
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        h, w = rgb.shape[:2]
        self._buf = rgb  # QImage reads this memory
        self._img = QImage(self._buf.data, w, h, 3 * w, QImage.Format.Format_RGB888)
        self._labels = labels or []
        self._label_colors = colors or [palette.TEXT_DIM] * len(self._labels)
        self._label_w = (
            (max((self.fontMetrics().horizontalAdvance(t) for t in self._labels), default=0) + 6) if self._labels else 0
        )
        self._cols = columns or []
        self.setMinimumHeight(max(16, min(h * self._min_row_px, 900)) + self._band())
        self.updateGeometry()
        self.update()

    def clear(self) -> None:
        """Show nothing (no matrix, no labels)."""
        self._img = None
        self._buf = np.zeros((1, 1, 3), dtype=np.uint8)
        self._labels, self._label_colors, self._cols, self._label_w = [], [], [], 0
        self.setMinimumHeight(16)
        self.updateGeometry()
        self.update()

    def _band(self) -> int:
        """Height of the column-label band, pixels (0 without labels)."""
        return self.fontMetrics().height() + 4 if self._cols else 0

    def sizeHint(self) -> QSize:
        rows = self._img.height() if self._img is not None else 1
        return QSize(400, max(16, rows * self._min_row_px) + self._band())

    def paintEvent(self, _event: object) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(palette.PLOT_BG))
        if self._img is None:
            p.end()
            return
        fm = self.fontMetrics()
        h = self.height() - self._band()
        area = QRect(self._label_w, 0, self.width() - self._label_w, h)
        p.drawImage(area, self._img)
        if self._cols:
            cw = area.width() / len(self._cols)
            step = max(1, int(np.ceil(fm.horizontalAdvance("mmmm") / max(cw, 1e-6))))  # a label every `step` columns
            p.setPen(QColor(palette.TEXT_DIM))
            for j in range(len(self._cols) - 1, -1, -step):  # the last column (the token itself) always labelled
                x = int(area.left() + j * cw)
                w = int(cw * step)
                text = fm.elidedText(self._cols[j], Qt.TextElideMode.ElideRight, max(w - 2, 1))
                p.drawText(
                    QRect(x, h + 2, w, fm.height()), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text
                )
        if self._labels:
            rows = len(self._labels)
            rh = h / rows
            if rh >= self.fontMetrics().height() * 0.8:
                for i, text in enumerate(self._labels):
                    p.setPen(QColor(self._label_colors[i]))
                    p.drawText(
                        QRect(0, int(i * rh), self._label_w - 4, int(rh) + 1),
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                        text,
                    )
        p.end()


def _label(text: str, *, wrap: bool = True, name: str = "detailLabel") -> QLabel:
    lab = QLabel(text)
    lab.setObjectName(name)
    lab.setWordWrap(wrap)
    lab.setTextFormat(Qt.TextFormat.RichText)
    return lab


def _strip_text(text: str) -> str:
    """A token as the strip under a heatmap shows it (white space visible, isolated)."""
    return visible(text)


def _token_html(text: str) -> str:
    """A token in a caption: white space visible, isolated (:mod:`app.ui.common.token_label`)."""
    return f"<code style='background:{palette.CODE_BG}'>{visible_html(text)}</code>"


def lens_cell_text(text: str, p: float, next_rank: int = 0) -> str:
    """A lens cell: the top token (isolated: a right-to-left token stays before its probability), its
    probability, and the rank of the token that came next (0: unknown, left out)."""
    return f"{quoted(text)} {p:.0%}" + (f"  #{next_rank}" if next_rank else "")


def self_check_html(ins: TokenInspection) -> str:
    """The lens self-check in words: the last layer's lens against the logits llama.cpp computed in the
    inspect context for that position and, when the chat context still holds its own logits for it
    (its last evaluated position), against those too. Green when within 5% of the logit range."""
    lens = ins.lens
    ok = max(0.05 * lens.logit_range, 1e-3)
    d = lens.last_layer_max_abs_diff
    text = (
        f"<span style='color:{palette.GREEN if d <= ok else palette.RED}'>Self-check: the last layer's lens "
        f"against the logits llama.cpp computed in the inspect context for position {ins.position}: "
        f"largest difference {d:.4f} (logit range {lens.logit_range:.1f}).</span>"
    )
    c = lens.chat_max_abs_diff
    if c is None:
        return (
            text + f" <span style='color:{palette.TEXT_DIM}'>(The chat context holds its own logits only for its "
            "last evaluated position, until the next turn: inspect that one to compare with them too.)</span>"
        )
    contexts = lens.contexts_max_abs_diff
    between = f"; the two contexts' logits differ by at most {contexts:.4f}" if contexts is not None else ""
    if contexts is not None and ins.path is InspectPath.RE_EVAL:
        between += (
            " (re-evaluated: the earlier positions were computed in other batches than the chat's, "
            "which llama.cpp's CPU kernels round differently)"
        )
    return text + (
        f" <span style='color:{palette.GREEN if c <= ok else palette.RED}'>Against the logits the chat context "
        f"computed for this position (its last evaluated one): largest difference {c:.4f}{between}.</span>"
    )


class LensTab(QWidget):
    """Layers × positions: each cell the lens's best guess with its probability, coloured by it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        self.caption = _label("")
        lay.addWidget(self.caption)
        self.table = QTableWidget()
        self.table.setObjectName("lensTable")
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        lay.addWidget(self.table, 1)
        self.check = _label("")
        self.check.setObjectName("lensSelfCheck")
        lay.addWidget(self.check)

    def clear(self) -> None:
        self.caption.setText("")
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.check.setText("")

    def show_inspection(self, ins: TokenInspection) -> None:
        lens = ins.lens
        n_layer = len(lens.cells)
        cols = len(lens.positions)
        self.caption.setText(
            "Each layer's residual stream (<code>l_out</code>) read through the output norm and the "
            f"{'tied embedding table' if lens.tied else 'output matrix'} as if it were the last layer "
            f"(the logit lens){f', softcapped at {lens.softcap:g}' if lens.softcap else ''}. "
            "Cells: the top prediction and its probability; the tooltip lists the top candidates and "
            "the rank of the token that actually came next. Last layer on top."
        )
        self.table.clear()
        self.table.setRowCount(n_layer)
        self.table.setColumnCount(cols)
        heads = []
        for pos, (_tid, text), (nid, ntext) in zip(lens.positions, lens.tokens, lens.next_tokens, strict=True):
            mark = "▶ " if pos == ins.position else ""
            nxt = f" → {quoted(ntext)}" if nid >= 0 else ""
            heads.append(f"{mark}{pos}: {quoted(text)}{nxt}")
        self.table.setHorizontalHeaderLabels(heads)
        self.table.setVerticalHeaderLabels([f"L{il}" for il in reversed(range(n_layer))])
        for r, il in enumerate(reversed(range(n_layer))):
            for c in range(cols):
                cell = lens.cells[il][c]
                _tid, text, p = cell.top[0]
                item = QTableWidgetItem(lens_cell_text(text, p, cell.next_rank))
                rgb = ramp(np.asarray([p], dtype=np.float32), palette.PLOT_BG, palette.GREEN)[0]
                item.setBackground(QColor(int(rgb[0]), int(rgb[1]), int(rgb[2])))
                item.setForeground(QColor(palette.TEXT))
                tips = "\n".join(f"{quoted(t)} ({i}): {q:.2%}" for i, t, q in cell.top)
                nid, ntext = lens.next_tokens[c]
                nxt = f"\nnext token {quoted(ntext)}: rank {cell.next_rank:,}, p {cell.next_p:.2%}" if nid >= 0 else ""
                item.setToolTip(f"layer {il}, position {lens.positions[c]}\n{tips}{nxt}")
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.check.setText(self_check_html(ins))


class AttentionTab(QWidget):
    """Head-averaged attention per layer over the earlier tokens, and one layer's heads as small multiples."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        note = _label(f"<b>{CAUSATION_NOTE}</b>")
        note.setObjectName("causationNote")
        lay.addWidget(note)
        self.caption = _label("")
        lay.addWidget(self.caption)
        self.average = Heatmap(min_row_px=12)
        lay.addWidget(self.average)
        row = QHBoxLayout()
        row.addWidget(QLabel("Heads of layer"))
        self.layer = QSpinBox()
        self.layer.setObjectName("attentionLayer")
        self.layer.valueChanged.connect(self._show_heads)
        row.addWidget(self.layer)
        self.layer_note = _label("", wrap=False)
        row.addWidget(self.layer_note, 1)
        lay.addLayout(row)
        self.heads = Heatmap(min_row_px=14)
        lay.addWidget(self.heads)
        self.strip = _label("")
        self.strip.setObjectName("attentionStrip")
        lay.addWidget(self.strip)
        lay.addStretch(1)
        self._att: AttentionMaps | None = None
        self._texts: tuple[str, ...] = ()

    def clear(self) -> None:
        self._att, self._texts = None, ()
        self.caption.setText("")
        self.layer_note.setText("")
        self.strip.setText("")
        self.average.clear()
        self.heads.clear()

    def show_inspection(self, ins: TokenInspection) -> None:
        att = ins.attention
        self._att = att
        self._texts = att.key_texts
        n = att.key_positions[1] - att.key_positions[0]
        w = np.frombuffer(att.weights, dtype=np.float32).reshape(att.n_layer, att.n_head, n)
        avg, k = bin_columns(w.mean(axis=1))
        scale = float(avg.max()) or 1.0
        labels = [f"L{il}{' SWA' if att.sliding[il] else ''}" for il in range(att.n_layer)]
        colors = [palette.PURPLE if att.sliding[il] else palette.TEXT_DIM for il in range(att.n_layer)]
        strip = [_strip_text(t) for t in att.key_texts[::k]]
        self.average.set_rgb(ramp(avg / scale), labels, colors, strip)
        groups = max(att.head_kv) + 1 if att.head_kv else 1
        swa = sum(att.sliding)
        self.caption.setText(
            f"Where position {ins.position} ({_token_html(ins.text)}) attends, per layer (head average; rows "
            f"layer 0 first; columns: every position {att.key_positions[0]}…{att.key_positions[1] - 1}, the token "
            f"itself last{f', {k} positions summed per column' if k > 1 else ''}). "
            f"{att.n_head} query heads share {groups} KV head{'s' if groups != 1 else ''}: "
            f"{attention_label(att.n_head, groups)}"
            + (f"; {swa} sliding-window layers (purple) see only the last {att.window} tokens." if swa else ".")
            + f" Rows sum to 1 within {att.row_sum_max_error:.1e}."
        )
        self.layer.blockSignals(True)
        self.layer.setRange(0, att.n_layer - 1)
        self.layer.setValue(att.n_layer - 1)
        self.layer.blockSignals(False)
        self._show_heads(att.n_layer - 1)

    def _show_heads(self, il: int) -> None:
        att = self._att
        if att is None:
            return
        n = att.key_positions[1] - att.key_positions[0]
        w = np.frombuffer(att.weights, dtype=np.float32).reshape(att.n_layer, att.n_head, n)[il]
        part, k = bin_columns(w)
        self.heads.set_rgb(
            ramp(part / (float(part.max()) or 1.0)),
            [f"h{h} · kv{att.head_kv[h]}" for h in range(att.n_head)],
            [palette.LINK if att.head_kv[h] % 2 else palette.TEXT_DIM for h in range(att.n_head)],
            [_strip_text(t) for t in self._texts[::k]],
        )
        kind = f"sliding window of {att.window}" if att.sliding[il] else "global attention"
        self.layer_note.setText(f"layer {il}: {kind}; one row per head, labelled with its KV head (GQA group)")
        avg = w.mean(axis=0)
        top = np.argsort(-avg)[:10]
        base = att.key_positions[0]
        self.strip.setText(
            "Most attended tokens in this layer (head average): "
            + " ".join(
                f"{_token_html(self._texts[i])}<sub>{base + i}: {avg[i]:.0%}</sub>" for i in top if i < len(self._texts)
            )
        )


class EmbeddingTab(QWidget):
    """The token's embedding row as a strip, and its nearest vocabulary tokens."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        self.caption = _label("")
        lay.addWidget(self.caption)
        self.strip = Heatmap(min_row_px=36)
        lay.addWidget(self.strip)
        grid = QGridLayout()
        grid.addWidget(_label("<b>Nearest tokens to this embedding</b> (cosine)"), 0, 0)
        grid.addWidget(_label("<b>Nearest tokens to the final hidden state</b> (cosine, after the output norm)"), 0, 1)
        self.near = QListWidget()
        self.near.setObjectName("embeddingNeighbours")
        self.hidden = QListWidget()
        self.hidden.setObjectName("hiddenNeighbours")
        grid.addWidget(self.near, 1, 0)
        grid.addWidget(self.hidden, 1, 1)
        lay.addLayout(grid, 1)

    def clear(self) -> None:
        self.caption.setText("")
        self.strip.clear()
        self.near.clear()
        self.hidden.clear()

    def show_inspection(self, ins: TokenInspection) -> None:
        e = ins.embedding
        vec = np.frombuffer(e.vector, dtype=np.float32)
        self.strip.set_rgb(diverging(vec[None, :]))
        scale = f"; the model multiplies it by {e.scale:.2f} before layer 0" if e.scale != 1.0 else ""
        self.caption.setText(
            f"Row {ins.token_id} of the embedding table ({_token_html(ins.text)}): {vec.shape[0]} numbers "
            f"(blue negative, red positive), L2 norm {e.norm:.3f}{scale}. The vocabulary table for these "
            f"neighbours takes {format_bytes(e.table_bytes)} in the engine (built on the first inspection)."
        )
        self.near.clear()
        self.near.addItems([f"{quoted(t)}  ({i})  cos {c:.3f}" for i, t, c in e.neighbours])
        self.hidden.clear()
        self.hidden.addItems([f"{quoted(t)}  ({i})  cos {c:.3f}" for i, t, c in e.hidden_neighbours])


DENSE_NOTE = (
    "This model is dense: every token runs the same feed-forward block, so there are no experts to show; "
    "experts exist only in mixture-of-experts models (expert_count in the GGUF)."
)


class ExpertsTab(QWidget):
    """Which experts each layer chose for the token, and the load per expert over the turn.

    The table and the load map show only for a mixture-of-experts model's inspection; for a dense
    model the tab is one line saying why it is empty (:data:`DENSE_NOTE`).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        self.caption = _label("")
        self.caption.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.caption)
        self.table = QTableWidget()
        self.table.setObjectName("expertsTable")
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        lay.addWidget(self.table, 1)
        self.load_caption = _label("")
        lay.addWidget(self.load_caption)
        self.load = Heatmap(min_row_px=16)
        lay.addWidget(self.load)
        self._show_tables(False)

    def _show_tables(self, on: bool) -> None:
        for w in (self.table, self.load_caption, self.load):
            w.setVisible(on)

    def clear(self) -> None:
        self.caption.setText("")
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.load_caption.setText("")
        self.load.clear()
        self._show_tables(False)

    def show_inspection(self, ins: TokenInspection) -> None:
        ex = ins.experts
        self.table.clear()
        if ex is None or not ex.chosen:
            self.caption.setText(DENSE_NOTE)
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            self.load_caption.setText("")
            self._show_tables(False)
            return
        self._show_tables(True)
        self.caption.setText(
            f"The router of each layer picks {ex.n_expert_used} of {ex.n_expert} experts for this token; "
            "their outputs are mixed with these weights."
        )
        self.table.setRowCount(len(ex.chosen))
        self.table.setColumnCount(ex.n_expert_used)
        self.table.setHorizontalHeaderLabels([f"choice {i + 1}" for i in range(ex.n_expert_used)])
        self.table.setVerticalHeaderLabels([f"L{il}" for il in range(len(ex.chosen))])
        for r, ch in enumerate(ex.chosen):
            for c, (e, w) in enumerate(zip(ch.experts, ch.weights, strict=True)):
                item = QTableWidgetItem(f"expert {e}: {w:.2f}")
                rgb = ramp(np.asarray([w], dtype=np.float32), palette.PLOT_BG, palette.PURPLE)[0]
                item.setBackground(QColor(int(rgb[0]), int(rgb[1]), int(rgb[2])))
                self.table.setItem(r, c, item)
        load = np.frombuffer(ex.load, dtype=np.float32).reshape(len(ex.chosen), ex.n_expert)
        self.load_caption.setText(
            f"Load over the {ex.load_tokens} positions of this turn up to this token (at most {MAX_EXPERT_SPAN} back): "
            "per layer (rows), the share of tokens that chose each "
            f"expert (columns 0…{ex.n_expert - 1}; brighter = busier; even load is {ex.n_expert_used / ex.n_expert:.0%})."
        )
        self.load.set_rgb(
            ramp(load / (float(load.max()) or 1.0), palette.PLOT_BG, palette.PURPLE),
            [f"L{il}" for il in range(len(ex.chosen))],
            columns=[f"expert {e}" for e in range(ex.n_expert)],
        )


def place_text(position: int, reply_step: int | None) -> str:
    """Where a token is, in both numberings where both matter: ``token 302 of the reply · context
    position 319`` (the reply's tokens counted from 1, as the Funnel and the Tokens panel count;
    the context's positions from 0, the prompt's tokens first), or ``context position 12`` for a
    prompt token (``reply_step`` None)."""
    if reply_step is None:
        return f"context position {position}"
    return f"token {reply_step + 1} of the reply · context position {position}"


class InspectWindow(QDialog):
    """The inspect window (one, reused): a header and the four tabs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inspectWindow")
        self.setWindowTitle("Inspect a token")
        self.resize(1100, 700)
        lay = QVBoxLayout(self)
        self.header = _label(HINT)
        self.header.setObjectName("inspectHeader")
        lay.addWidget(self.header)
        self.tabs = QTabWidget()
        self.lens = LensTab()
        self.attention = AttentionTab()
        self.embedding = EmbeddingTab()
        self.experts = ExpertsTab()
        for w, name in (
            (self.lens, "Lens"),
            (self.attention, "Attention"),
            (self.embedding, "Embedding"),
            (self.experts, "Experts"),
        ):
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setWidget(w)
            self.tabs.addTab(scroll, name)
        lay.addWidget(self.tabs, 1)
        self.inspection: TokenInspection | None = None
        self.reply_step: int | None = None  # the inspected token's place in the reply (None: a prompt token)

    def show_pending(self, position: int, token_id: int, reply_step: int | None = None) -> None:
        """An inspection was asked for; say so until it arrives (the first one also builds the vocabulary tables).

        ``reply_step``: the token's place in the reply (0-based over the whole reply, as the Funnel
        counts), None for a prompt token; kept for the header of the inspection when it arrives."""
        self.reply_step = reply_step
        self.header.setText(f"Inspecting {place_text(position, reply_step)} (token id {token_id})…")
        self.tabs.setEnabled(False)  # greyed: the tabs still hold the previous token's figures

    def clear(self, note: str) -> None:
        """Drop the inspection shown (every tab emptied, greyed) and say why in the header (one line:
        ``note``, plain text)."""
        self.inspection = None
        for tab in (self.lens, self.attention, self.embedding, self.experts):
            tab.clear()
        self.tabs.setEnabled(False)
        self.header.setText(html.escape(note, quote=False))

    def show_failure(self, message: str) -> None:
        self.header.setText(f"<span style='color:{palette.RED}'>{html.escape(message)}</span>")
        self.tabs.setEnabled(self.inspection is not None)

    def show_inspection(self, ins: TokenInspection) -> None:
        """Fill every tab from ``ins``."""
        self.inspection = ins
        self.tabs.setEnabled(True)
        path = (
            "reusing the chat's KV cache"
            if ins.path is InspectPath.CACHE_REUSE
            else f"re-evaluating from the start ({html.escape(ins.fallback_reason)})"
        )
        tables = f", of which {ins.tables_s:.2f} s building the vocabulary tables" if ins.tables_s else ""
        self.header.setText(
            f"{place_text(ins.position, self.reply_step).capitalize()}: {_token_html(ins.text)} "
            f"(id {ins.token_id}), {ins.n_layer} layers. "
            f"Computed in a second llama.cpp context, {path}: {ins.evaluated:,} positions evaluated in "
            f"{ins.inspect_s:.2f} s{tables}; the inspector holds {format_bytes(ins.extra_memory_bytes)}."
        )
        self.lens.show_inspection(ins)
        self.attention.show_inspection(ins)
        self.embedding.show_inspection(ins)
        self.experts.show_inspection(ins)
        self.tabs.setTabEnabled(3, True)
