"""Messages between the UI process and the engine process.

Requests go to the engine; events come back. Both are frozen dataclasses of
plain values (they are pickled over a pipe). Every request with a
``request_id`` ends with exactly one terminal event for that id:
:class:`Finished` or :class:`Failed` for :class:`Generate`,
:class:`ModelLoaded` or :class:`Failed` for :class:`LoadModel`,
:class:`ContextReset` for :class:`ResetContext`,
:class:`FunnelComputed` or :class:`Failed` for :class:`ComputeFunnel`,
:class:`PromptRendered` or :class:`Failed` for :class:`RenderPrompt`.
:class:`PromptCounted` or :class:`Failed` for :class:`CountPrompt`.
:class:`TokenInspected` or :class:`Failed` for :class:`InspectToken`.
:class:`DepthSwept` or :class:`Failed` for :class:`SweepDepth` (after a :class:`DepthMeasured` per depth).
:class:`Quantized` or :class:`Failed` for :class:`Quantize`.
:class:`ComparisonFinished` or :class:`Failed` for :class:`CompareModels` (after one
:class:`ComparisonStarted` and a :class:`ComparisonProgressed` per chunk; :mod:`app.core.quant.comparison`).
:class:`PrepareInspect` and :class:`Shutdown` carry no id and get no answer.

Cancel is not a message: the UI sets a shared ``multiprocessing.Event`` that
the engine checks between prefill chunks and decode steps (docs/architecture.md, principle 4).

The messages live in three modules by their role: :mod:`~app.core.protocol.requests` (what the
window asks), :mod:`~app.core.protocol.progress` (what the engine reports while it works) and
:mod:`~app.core.protocol.answers` (the terminal event of each request). This package is their one
public face: ``from app.core import protocol as P`` and ``P.Generate``, ``P.Finished``...
"""

from __future__ import annotations

from app.core.protocol.answers import (
    MAX_RENDERED_PIECES,
    TERMINAL_EVENTS,
    ContextReset,
    Failed,
    FailureKind,
    Finished,
    FunnelComputed,
    ModelLoaded,
    PromptCounted,
    PromptPiece,
    PromptRendered,
    Quantized,
    TemplateSource,
    TokenInspected,
)
from app.core.protocol.progress import (
    ContextShifted,
    DeviceMemory,
    EngineReady,
    LogLine,
    PrefillProgress,
    PromptPrepared,
    QuantizeProgress,
    TokenBatch,
    TokenEvent,
)
from app.core.protocol.requests import (
    ComputeFunnel,
    CountPrompt,
    Generate,
    InspectToken,
    LoadModel,
    PrepareInspect,
    Quantize,
    RenderPrompt,
    Request,
    ResetContext,
    Shutdown,
)
from app.core.quant.comparison import (  # comparing two quantizations (issue 21)
    CompareModels,
    ComparisonFinished,
    ComparisonProgressed,
    ComparisonStarted,
)

Event = (
    EngineReady
    | ModelLoaded
    | PromptPrepared
    | PrefillProgress
    | TokenEvent
    | TokenBatch
    | ContextShifted
    | Finished
    | Failed
    | ContextReset
    | FunnelComputed
    | PromptRendered
    | PromptCounted
    | TokenInspected
    | LogLine
    | QuantizeProgress
    | Quantized
    | ComparisonStarted
    | ComparisonProgressed
    | ComparisonFinished
)

__all__ = [
    "MAX_RENDERED_PIECES",
    "TERMINAL_EVENTS",
    "CompareModels",
    "ComparisonFinished",
    "ComparisonProgressed",
    "ComparisonStarted",
    "ComputeFunnel",
    "ContextReset",
    "ContextShifted",
    "CountPrompt",
    "DeviceMemory",
    "EngineReady",
    "Event",
    "Failed",
    "FailureKind",
    "Finished",
    "FunnelComputed",
    "Generate",
    "InspectToken",
    "LoadModel",
    "LogLine",
    "ModelLoaded",
    "PrefillProgress",
    "PrepareInspect",
    "PromptCounted",
    "PromptPiece",
    "PromptPrepared",
    "PromptRendered",
    "Quantize",
    "QuantizeProgress",
    "Quantized",
    "RenderPrompt",
    "Request",
    "ResetContext",
    "Shutdown",
    "TemplateSource",
    "TokenBatch",
    "TokenEvent",
    "TokenInspected",
]

# ---- speed against context length (issue 21 §3) -------------------------------------------------
from app.core.protocol.answers import DepthSwept  # noqa: E402
from app.core.protocol.progress import DepthMeasured  # noqa: E402
from app.core.protocol.requests import SweepDepth  # noqa: E402

__all__ += ["DepthMeasured", "DepthSwept", "SweepDepth"]
# ---- end of speed against context length --------------------------------------------------------

# ---- embeddings (issue 23 §3) --------------------------------------------------------------------
from app.core.protocol.answers import Embedded, Pooling  # noqa: E402
from app.core.protocol.requests import CancelEmbed, Embed  # noqa: E402

__all__ += ["CancelEmbed", "Embed", "Embedded", "Pooling"]
# ---- end of embeddings ---------------------------------------------------------------------------

# ---- sizing a quantization (issue 21 §2) ------------------------------------------------------------
from app.core.protocol.answers import FallbackTensor, PlannedType, QuantizePlanned  # noqa: E402
from app.core.protocol.requests import PlanQuantize  # noqa: E402

__all__ += ["FallbackTensor", "PlanQuantize", "PlannedType", "QuantizePlanned"]
# ---- end of sizing a quantization -------------------------------------------------------------------

# ---- several API requests decoded together (issue 23 §4) -------------------------------------------
from app.core.protocol.parallel import SequenceFigures, SequencesProgressed, SequenceState  # noqa: E402
from app.core.protocol.requests import CancelSequence, GenerateParallel  # noqa: E402

__all__ += ["CancelSequence", "GenerateParallel", "SequenceFigures", "SequenceState", "SequencesProgressed"]
# ---- end of several API requests decoded together ---------------------------------------------------

# ---- output constraints (issue 23 §1) ------------------------------------------------------------
from app.core.protocol.answers import ConstraintChecked  # noqa: E402
from app.core.protocol.requests import CheckConstraint  # noqa: E402

__all__ += ["CheckConstraint", "ConstraintChecked"]
# ---- end of output constraints -------------------------------------------------------------------
