"""The Model panel's drawing of the loaded model: embedding table, N blocks, output head.

:class:`ArchitectureView` paints an :class:`~app.core.gguf.architecture.Architecture` top to
bottom, the way a token flows: token ids → the embedding table → the residual stream through
each block (attention, then feed-forward) → the output norm and LM head → logits. Blocks that
share a shape (e.g. Gemma 3's sliding-window blocks and its global ones) are described once,
each with a colour; then every block gets a row with its bytes as a bar split by tensor type
(its quantization mix), and a tooltip listing its tensors. Every figure comes from the GGUF.

The widget reports its height for a width (``heightForWidth``), so it wraps in a narrow dock
and the dock's scroll area scrolls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QHelpEvent, QPainter, QPaintEvent, QPen, QPolygonF, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from app.core.gguf.architecture import Architecture, Attention, AttentionKind, Block, FeedForward, Positions
from app.core.gguf.gguf_facts import format_bytes, format_count
from app.ui.common import palette
from app.ui.common.palette import qcolor

PAD = 8  # inner padding of a box, px
GAP = 6  # between items, px
ARROW = 16  # height of an arrow between boxes, px
ROW_H = 15  # one block's row, px
RADIUS = 5

# Block kinds take KIND_COLORS in order; tensor types take TYPE_COLORS by bytes, largest first
# (two sets, so a block's kind swatch is never read as one of its tensor types).
KIND_COLORS = (palette.ACCENT, palette.AMBER, palette.RED, palette.LINK)
TYPE_COLORS = (
    palette.GREEN,
    palette.PURPLE,
    palette.YELLOW,
    palette.TEXT_SOFT,
    palette.CACHED_BG,
    palette.PROB_BG[0],
    palette.MUTED,
    palette.PROB_BG[4],
)


def _ranges(indices: list[int]) -> str:
    """``0–4, 6–10, 12`` for a sorted list of layer numbers."""
    out: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], -2]:
        if i != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}–{prev}")
            start = i
        prev = i
    return ", ".join(out)


POSITIONS_TEXT = {
    Positions.ALIBI: "ALiBi (a distance penalty on the attention scores; no RoPE)",
    Positions.LEARNED: "no RoPE: positions come from a learned position_embd table added to the embedding",
    Positions.NONE: "no positional encoding in attention",
}


def attention_text(
    a: Attention, rope_dims: int = 0, rope_scaling: str = "none", positions: Positions = Positions.ROPE
) -> str:
    """One block's attention in words, e.g. ``Attention: GQA 3:1, 9 query heads sharing 3 K/V heads (3 per
    K/V head), head dim 64 ...``; ``multi-query attention (1 K/V head)`` when one K/V head serves every
    query head, ``multi-head attention`` when each has its own (:func:`app.core.gguf.architecture.attention_label`).

    Args:
        rope_dims: dimensions of each head RoPE rotates (0: the file does not say).
        rope_scaling: the model's RoPE scaling (``none``, ``yarn ×4 (from 32,768 tokens)``...).
        positions: the model's positional encoding; the RoPE figures are shown for RoPE only.
    """
    if a.kind is AttentionKind.GROUPED_QUERY:
        heads = f"{a.label}, {a.n_head} query heads sharing {a.n_head_kv} K/V heads ({a.gqa_ratio} per K/V head)"
    elif a.kind is AttentionKind.MULTI_QUERY:
        heads = f"{a.label}: its {a.n_head} query heads all read the same K/V head"
    else:
        heads = f"{a.label}, {a.n_head} query heads with {a.n_head_kv} K/V heads (one each)"
    dims = (
        f"head dim {a.head_dim_k}" if a.head_dim_k == a.head_dim_v else f"head dim K {a.head_dim_k} / V {a.head_dim_v}"
    )
    rope = f"RoPE base {a.rope_base:,.0f}" + (
        "" if a.rope_base_from_file else " (llama.cpp's default: not in the file)"
    )
    rope += f" on {rope_dims} dims, scaling {rope_scaling}" if rope_dims else f", scaling {rope_scaling}"
    if positions is not Positions.ROPE:
        rope = POSITIONS_TEXT[positions]
    reach = f"sees the last {a.sliding_window:,} tokens (sliding window)" if a.is_swa else "sees the whole context"
    return f"Attention: {heads}, {dims}, {rope}; {reach}."


def ffn_text(f: FeedForward, n_embd: int) -> str:
    """One block's feed-forward network in words, named from the architecture (``f.name``: SwiGLU for
    llama, GeGLU for gemma3, "gated FFN" when the activation is not known)."""
    gate = f", {f.name}"
    if f.is_moe:
        text = (
            f"Feed-forward: mixture of {f.n_expert} experts, a router picks {f.n_expert_used} per token; "
            f"each {n_embd:,} → {f.n_ff_expert:,} → {n_embd:,}{gate}"
        )
        if f.n_expert_shared:
            text += f"; {f.n_expert_shared} shared expert{'s' if f.n_expert_shared != 1 else ''} every token uses"
        return text + "."
    return f"Feed-forward: {n_embd:,} → {f.n_ff:,} → {n_embd:,}{gate}."


# The order a token meets a block's tensors in llama.cpp's graphs (src/models/*.cpp): norm,
# Q/K/V (with their norms), attention output, post-attention norm, then the FFN likewise.
# Names not listed keep the file's order after these.
FLOW = (
    "attn_norm",
    "attn_qkv",
    "attn_q",
    "attn_q_norm",
    "attn_k",
    "attn_k_norm",
    "attn_v",
    "attn_output",
    "attn_post_norm",
    "post_attention_norm",
    "ffn_norm",
    "ffn_gate_inp",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "ffn_gate_exps",
    "ffn_up_exps",
    "ffn_down_exps",
    "ffn_gate_shexp",
    "ffn_up_shexp",
    "ffn_down_shexp",
    "ffn_post_norm",
    "post_ffw_norm",
)


def flow_order(b: Block) -> list[str]:
    """The block's tensor names (without ``.weight``) in the order a token meets them (:data:`FLOW`)."""
    names = [t.name.removesuffix(".weight") for t in b.tensors]
    rank = {n: i for i, n in enumerate(FLOW)}
    return sorted(names, key=lambda n: (rank.get(n, len(FLOW)), names.index(n)))


def block_kinds(arch: Architecture) -> list[tuple[str, list[int], Block]]:
    """The distinct block shapes, in order of first appearance: ``(colour, layer numbers, an example block)``."""
    kinds: list[tuple[str, list[int], Block]] = []
    keys: list[tuple[Attention, FeedForward]] = []
    for b in arch.blocks:
        key = (b.attention, b.ffn)
        if key in keys:
            kinds[keys.index(key)][1].append(b.index)
        else:
            keys.append(key)
            kinds.append((KIND_COLORS[len(kinds) % len(KIND_COLORS)], [b.index], b))
    return kinds


def type_colors(arch: Architecture) -> dict[str, str]:
    """A colour per ggml type of the blocks' tensors, the type with the most bytes first."""
    acc: dict[str, int] = {}
    for b in arch.blocks:
        for t, n in b.bytes_by_type:
            acc[t] = acc.get(t, 0) + n
    order = sorted(acc, key=lambda t: -acc[t])
    return {t: TYPE_COLORS[i % len(TYPE_COLORS)] for i, t in enumerate(order)}


def block_tooltip(b: Block) -> str:
    """A block's tensors: name, shape, type, bytes."""
    lines = [f"Block {b.index}: {format_count(b.n_params)} parameters, {format_bytes(b.n_bytes)}"]
    for t in b.tensors:
        shape = " × ".join(str(d) for d in t.shape)
        lines.append(f"  {t.name}  [{shape}]  {t.type_name}  {format_bytes(t.n_bytes)}")
    return "\n".join(lines)


@dataclass
class _Item:
    """One thing to paint: a box of text, a line of text, an arrow or a block row."""

    kind: str  # "box", "text", "arrow", "row", "legend"
    rect: QRectF
    text: str = ""
    color: str = palette.BORDER
    title: str = ""
    block: Block | None = None
    extra: list[tuple[str, str]] = field(default_factory=list)  # legend: (colour, text)


class ArchitectureView(QWidget):
    """Paints the model's architecture; :meth:`set_architecture` gives it one (None: nothing)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("architectureView")
        self.arch: Architecture | None = None
        sp = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        sp.setHeightForWidth(True)
        self.setSizePolicy(sp)
        self.setMouseTracking(True)
        self._small = QFont(self.font())
        self._small.setPointSizeF(max(7.0, self.font().pointSizeF() * 0.88))
        self._bold = QFont(self.font())
        self._bold.setBold(True)
        self._items: list[_Item] = []
        self._laid_width = -1

    # ------------------------------------------------------------------------------- model
    def set_architecture(self, arch: Architecture | None) -> None:
        self.arch = arch
        self._laid_width = -1
        self.updateGeometry()
        self.update()

    # ------------------------------------------------------------------------------ layout
    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return int(self._layout(width)[1])

    def sizeHint(self) -> QSize:
        w = max(self.width(), 260)
        return QSize(w, self.heightForWidth(w))

    def minimumSizeHint(self) -> QSize:
        return QSize(180, self.heightForWidth(max(self.width(), 180)) if self.arch else 0)

    def resizeEvent(self, e: QResizeEvent) -> None:
        self._laid_width = -1
        super().resizeEvent(e)

    def _text_height(self, text: str, width: float, font: QFont) -> float:
        fm = QFontMetrics(font)
        r = fm.boundingRect(QRectF(0, 0, width, 10_000).toRect(), int(Qt.TextFlag.TextWordWrap), text)
        return float(r.height())

    def _layout(self, width: int) -> tuple[list[_Item], float]:
        """Items and total height for ``width`` pixels (cached for the current width)."""
        arch = self.arch
        if arch is None:
            return [], 0.0
        if width == self._laid_width and self._items:
            return self._items, self._items[-1].rect.bottom() + PAD
        items: list[_Item] = []
        w = float(max(width, 120))
        inner = w - 2 * PAD
        y = 0.0

        def box(title: str, text: str, color: str) -> None:
            nonlocal y
            h = self._text_height(title, inner, self._bold) + 2 + self._text_height(text, inner, self._small) + 2 * PAD
            items.append(_Item("box", QRectF(0.5, y + 0.5, w - 1, h), text, color, title))
            y += h

        def arrow(label: str) -> None:
            nonlocal y
            h = max(float(ARROW), self._text_height(label, inner - 24, self._small) + 4)
            items.append(_Item("arrow", QRectF(0, y, w, h), label))
            y += h

        def text(t: str, font_bold: bool = False) -> None:
            nonlocal y
            h = self._text_height(t, w, self._bold if font_bold else self._small) + 2
            items.append(_Item("text", QRectF(0, y, w, h), t, title="bold" if font_bold else ""))
            y += h

        arrow("token ids (one per token of the prompt)")
        emb = arch.embedding
        if emb is not None:
            tied = (
                "tied: the output head reuses this table (read whole each token)"
                if emb.tied
                else "untied (the head has its own matrix)"
            )
            box(
                "Embedding table (token_embd)",
                f"{emb.n_vocab:,} tokens × {emb.n_embd:,} dims · {emb.type_name} · {format_bytes(emb.n_bytes)} · "
                f"{format_count(emb.n_params)} parameters · {tied}. A lookup reads one row per token "
                f"({format_bytes(emb.row_bytes)}).",
                palette.TEXT_DIM,
            )
        arrow(f"residual stream: {arch.n_embd:,} values per token")
        kinds = block_kinds(arch)
        n = arch.n_layer
        for color, layers, b in kinds:
            which = "all blocks" if len(layers) == n else f"blocks {_ranges(layers)}"
            kind = "sliding-window" if b.attention.is_swa else "global-attention"
            box(
                f"{len(layers)} of {n} blocks ({which}): {kind}",
                f"{attention_text(b.attention, arch.rope_dims, arch.rope_scaling, arch.positions)} {ffn_text(b.ffn, arch.n_embd)} "
                f"Tensors, as a token meets them: {', '.join(flow_order(b))}.",
                color,
            )
            y += 2
        y += GAP - 2
        colors = type_colors(arch)
        text("Each block, top to bottom: attention then feed-forward, each added to the residual stream. Bytes:")
        kind_of = {i: c for c, layers, _ in kinds for i in layers}
        for b in arch.blocks:
            segs = [(colors.get(t, palette.MUTED), t) for t, _ in b.bytes_by_type]
            items.append(_Item("row", QRectF(0, y, w, ROW_H), block=b, extra=segs, color=kind_of[b.index]))
            y += ROW_H
        totals: dict[str, int] = {}
        for b in arch.blocks:
            for t, nb in b.bytes_by_type:
                totals[t] = totals.get(t, 0) + nb
        legend = [(colors[t], f"{t} {format_bytes(nb)}") for t, nb in sorted(totals.items(), key=lambda kv: -kv[1])]
        lh = self._legend_height(legend, w)
        items.append(_Item("legend", QRectF(0, y + 3, w, lh), extra=legend))
        y += lh + 3 + GAP
        arrow("last position's hidden state")
        head = arch.head
        if head.tied:
            head_text = (
                f"output_norm ({head.norm_type}) → LM head = the embedding table, transposed "
                f"({emb.type_name if emb else head.type_name}) → {emb.n_vocab if emb else 0:,} logits"
            )
        else:
            head_text = (
                f"output_norm ({head.norm_type}) → output.weight ({head.type_name}, {format_bytes(head.n_bytes)}) → "
                f"{emb.n_vocab if emb else 0:,} logits"
            )
        if head.final_logit_softcap:
            head_text += f"; logits soft-capped at ±{head.final_logit_softcap:g}"
        box("Output head", head_text + ".", palette.TEXT_DIM)
        arrow("logits → the sampler")
        other = f" + {len(arch.other)} other tensors" if arch.other else ""
        head_params = f" + head {format_count(head.n_params)}" if head.n_params else ""
        text(
            f"Parameters: {arch.n_params:,} ({format_count(arch.n_params)}) = embedding "
            f"{format_count(emb.n_params if emb else 0)} + {n} blocks {format_count(arch.block_params)}"
            f"{head_params}{other} · tensors {format_bytes(arch.n_bytes)}."
        )
        self._items = items
        self._laid_width = width
        return items, y + PAD

    def _legend_height(self, legend: list[tuple[str, str]], w: float) -> float:
        fm = QFontMetrics(self._small)
        x, lines = 0.0, 1
        for _, t in legend:
            iw = 14 + fm.horizontalAdvance(t) + 10
            if x + iw > w and x > 0:
                lines += 1
                x = 0.0
            x += iw
        return lines * (fm.height() + 2)

    # ------------------------------------------------------------------------------- paint
    def paintEvent(self, _e: QPaintEvent) -> None:
        items, _h = self._layout(self.width())
        if not items:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        biggest = max((b.n_bytes for b in self.arch.blocks), default=1) if self.arch else 1
        fm = QFontMetrics(self._small)
        label_w = fm.horizontalAdvance("L000") + 4
        size_w = fm.horizontalAdvance("000.0 MiB") + 4
        for it in items:
            r = it.rect
            if it.kind == "box":
                p.setPen(QPen(qcolor(it.color), 1.2))
                p.setBrush(qcolor(palette.BASE))
                p.drawRoundedRect(r, RADIUS, RADIUS)
                inner = r.adjusted(PAD, PAD, -PAD, -PAD)
                p.setFont(self._bold)
                p.setPen(qcolor(palette.TEXT))
                th = self._text_height(it.title, inner.width(), self._bold)
                p.drawText(
                    QRectF(inner.left(), inner.top(), inner.width(), th), int(Qt.TextFlag.TextWordWrap), it.title
                )
                p.setFont(self._small)
                p.setPen(qcolor(palette.TEXT_SOFT))
                p.drawText(
                    QRectF(inner.left(), inner.top() + th + 2, inner.width(), inner.height() - th - 2),
                    int(Qt.TextFlag.TextWordWrap),
                    it.text,
                )
            elif it.kind == "arrow":
                x = r.left() + 14
                p.setPen(QPen(qcolor(palette.MUTED), 1.5))
                p.drawLine(QPointF(x, r.top() + 1), QPointF(x, r.bottom() - 4))
                p.setBrush(qcolor(palette.MUTED))
                p.drawPolygon(
                    QPolygonF(
                        [QPointF(x - 4, r.bottom() - 6), QPointF(x + 4, r.bottom() - 6), QPointF(x, r.bottom() - 1)]
                    )
                )
                p.setFont(self._small)
                p.setPen(qcolor(palette.TEXT_DIM))
                p.drawText(
                    QRectF(x + 10, r.top(), r.width() - x - 10, r.height()),
                    int(Qt.TextFlag.TextWordWrap | Qt.AlignmentFlag.AlignVCenter),
                    it.text,
                )
            elif it.kind == "text":
                p.setFont(self._bold if it.title == "bold" else self._small)
                p.setPen(qcolor(palette.TEXT_DIM))
                p.drawText(r, int(Qt.TextFlag.TextWordWrap), it.text)
            elif it.kind == "row" and it.block is not None:
                b = it.block
                p.setFont(self._small)
                p.setPen(qcolor(palette.TEXT_DIM))
                p.drawText(
                    QRectF(r.left(), r.top(), label_w, r.height()), int(Qt.AlignmentFlag.AlignVCenter), f"L{b.index}"
                )
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(qcolor(it.color))
                p.drawRect(QRectF(r.left() + label_w, r.top() + 2, 4, r.height() - 4))
                bar = QRectF(
                    r.left() + label_w + 8, r.top() + 3, max(10.0, r.width() - label_w - 8 - size_w), r.height() - 6
                )
                p.setBrush(qcolor(palette.TRACK))
                p.drawRect(bar)
                x = bar.left()
                for (color, _t), (_t2, nb) in zip(it.extra, b.bytes_by_type, strict=True):
                    seg = bar.width() * nb / biggest
                    p.setBrush(qcolor(color))
                    p.drawRect(QRectF(x, bar.top(), seg, bar.height()))
                    x += seg
                p.setPen(qcolor(palette.TEXT_SOFT))
                p.drawText(
                    QRectF(bar.right() + 4, r.top(), size_w - 4, r.height()),
                    int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight),
                    format_bytes(b.n_bytes),
                )
            elif it.kind == "legend":
                p.setFont(self._small)
                x, y = r.left(), r.top()
                for color, t in it.extra:
                    iw = 14 + fm.horizontalAdvance(t) + 10
                    if x + iw > r.right() and x > r.left():
                        x, y = r.left(), y + fm.height() + 2
                    p.setPen(Qt.PenStyle.NoPen)
                    p.setBrush(qcolor(color))
                    p.drawRect(QRectF(x, y + 3, 10, fm.height() - 6))
                    p.setPen(qcolor(palette.TEXT_SOFT))
                    p.drawText(QPointF(x + 14, y + fm.ascent()), t)
                    x += iw
        p.end()

    # ------------------------------------------------------------------------------ tooltips
    def block_at(self, y: float) -> Block | None:
        """The block whose row is at ``y`` (px), if any."""
        for it in self._layout(self.width())[0]:
            if it.kind == "row" and it.rect.top() <= y < it.rect.bottom():
                return it.block
        return None

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.Type.ToolTip and isinstance(e, QHelpEvent):
            b = self.block_at(e.y())
            if b is not None:
                QToolTip.showText(e.globalPos(), block_tooltip(b), self)
            else:
                QToolTip.hideText()
                e.ignore()
            return True
        return super().event(e)
