"""Loading a model: check the file, connect the RPC servers, create the ``llama_cpp.Llama`` and what hangs off it.

:func:`load_model` builds a :class:`LoadedModel` (everything that exists only while a model is
loaded) and the :class:`~app.core.protocol.ModelLoaded` event that describes it; the session
frees the previous model first and holds the new one (:class:`app.engine.session.Session`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.core import protocol as P
from app.core.chat.context import FlashAttention, LoadSettings
from app.core.gguf.gguf_info import GGUFError, GGUFInfo, check_loadable
from app.core.hardware.memory import KVCacheLayout, KVCacheType, kv_cache_layout, n_ubatch_for
from app.core.rpc import RpcError
from app.engine import rpc
from app.engine.devices import local_gpu_offload
from app.engine.errors import CancelFlag, EngineError
from app.engine.funnel_store import ReplyLogits
from app.engine.inspection.token_inspector import TokenInspector
from app.engine.inspector import Inspector
from app.engine.llama_context import GlassboxLlama
from app.engine.llama_log import LlamaLog
from app.engine.prefill import Prefiller
from app.engine.prompt import PromptBuilder
from app.engine.speculative.setup import Speculator, check_draft, set_up
from app.engine.threads import auto_threads, auto_threads_batch
from app.engine.vocab import Vocab

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    """What exists only while a model is loaded (built together by :func:`load_model`).

    Attributes:
        llm: the ``llama_cpp.Llama`` (a :class:`~app.engine.llama_context.GlassboxLlama`); its
            context is the chat's, its KV cache the one turns reuse.
        settings: the load settings in effect (threads, n_batch and n_gpu_layers resolved).
        n_ctx: the context llama.cpp allocated, tokens.
        rpc: the RPC servers the model's layers are on (:data:`app.engine.rpc.NO_RPC` without),
            their devices and bytes sent per turn.
        funnel_vocab: the funnel thread's own vocabulary (:class:`Vocab` keeps a text buffer).
        token_inspector: "Inspect a token": its own context, built on first use.
        store: the latest reply's logits, kept when it asked for them (``keep_logits`` or
            alternatives); written by :mod:`app.engine.turn`, read by the funnel.
        cache_from_api: the KV cache holds what an external request left, nothing of the
            person's (:mod:`app.engine.turn` keeps it; a reset clears it).
        speculator: speculative decoding's drafter (a draft model's context), None when off.
    """

    llm: Any
    info: GGUFInfo
    settings: LoadSettings
    n_ctx: int
    layout: KVCacheLayout
    vocab: Vocab
    prompt: PromptBuilder
    prefiller: Prefiller
    inspector: Inspector
    funnel_vocab: Vocab
    token_inspector: TokenInspector
    rpc: rpc.RpcLink
    store: ReplyLogits | None = None
    cache_from_api: bool = False
    speculator: Speculator | None = None


def check_model(path: str) -> GGUFInfo:
    """The GGUF facts of ``path`` when llama.cpp may be given it (:func:`app.core.gguf.gguf_info.check_loadable`).

    Raises:
        EngineError: ``bad_model`` (the file fails validation; llama.cpp never sees it).
    """
    try:
        return check_loadable(path)
    except GGUFError as exc:
        raise EngineError(P.FailureKind.BAD_MODEL, exc.message) from None


def load_model(
    req: P.LoadModel,
    info: GGUFInfo,
    *,
    emit: Callable[[object], None],
    cancel: CancelFlag,
    llama_log: LlamaLog,
    t0: float,
) -> tuple[LoadedModel, P.ModelLoaded]:
    """Load ``req.path`` (checked: ``info``) with ``req.settings``; call with no model loaded.

    Args:
        emit: sends an event to the UI (a warning when the chat template does not compile; the
            prefiller's progress).
        cancel: the Stop flag (the prefiller checks it).
        llama_log: the process's llama.cpp log capture (the reasons of a refusal, buffer sizes).
        t0: when the request arrived (perf_counter seconds), for ``load_s``.

    Returns:
        The loaded model and its :class:`~app.core.protocol.ModelLoaded` event.

    Raises:
        EngineError: ``rpc`` (an RPC server cannot be used: unreachable, busy, another llama.cpp
            version), ``load`` (llama.cpp refused it, or the draft model; its error lines are quoted),
            ``incompatible`` / ``bad_model`` / ``bad_settings`` (the draft model cannot draft for it:
            :func:`app.engine.speculative.setup.check_draft`, before any weights are read).
    """
    s = req.settings
    draft_info = check_draft(req.path, s.speculation)
    link = _connect_rpc(s.rpc_servers)  # after the unload: the previous model's connections are closed
    gpu = link.active or local_gpu_offload()
    n_threads = s.n_threads or auto_threads()
    n_threads_batch = s.n_threads or auto_threads_batch()
    n_ctx_req = s.n_ctx or info.context_length or 4096
    n_batch = max(16, s.n_batch)
    n_ubatch = n_ubatch_for(n_batch, n_ctx_req)  # what llama.cpp will run (it applies the same caps)
    if s.v_cache_conflict:  # llama.cpp would refuse it with one log line; say why and what to do
        raise EngineError(P.FailureKind.LOAD, f"{Path(req.path).name} was not loaded. {s.v_cache_conflict}")
    llama_log.mark()
    restore = link.use_devices()  # the Llama below loads onto the RPC devices (then this machine's GPUs)
    try:
        llm = GlassboxLlama(
            model_path=req.path,
            n_ctx=n_ctx_req,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            n_gpu_layers=s.n_gpu_layers if gpu else 0,
            swa_full=s.swa_full,
            flash_attn=s.flash_attn,
            type_k=s.type_k,
            type_v=s.type_v,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        details = llama_log.errors_since_mark()
        why = "; ".join(details) if details else str(exc)
        cache = ""
        if (s.type_k, s.type_v) != (KVCacheType.F16, KVCacheType.F16):
            cache = f" or the KV cache types ({s.type_k} K, {s.type_v} V: try f16)"
        raise EngineError(
            P.FailureKind.LOAD,
            f"llama.cpp could not load {Path(req.path).name}: {why}. "
            "The file passed Glassbox's checks, so this llama.cpp build may not support this "
            f"architecture ({info.architecture}) or quantization ({info.quant_type}){cache}, or memory ran out.",
        ) from None
    finally:
        restore()
    flash_attn_active = llama_log.flash_attn_resolved()
    if flash_attn_active is None:
        flash_attn_active = s.flash_attn is not FlashAttention.OFF
    settings = replace(s, n_threads=n_threads, n_batch=n_batch, n_gpu_layers=s.n_gpu_layers if gpu else 0)
    n_ctx = llm.n_ctx()
    try:
        speculator, spec, spec_warning = set_up(
            llm, info, settings, draft_info, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads_batch, gpu=gpu
        )
    except EngineError:
        llm.close()
        raise
    if spec_warning:
        emit(P.LogLine("warning", spec_warning))
    settings = replace(settings, speculation=spec)
    vocab = Vocab(llm.model)
    bos_text = vocab.text(vocab.bos) if vocab.bos >= 0 else ""
    eos_text = vocab.text(vocab.eos) if vocab.eos >= 0 else ""
    layout = kv_cache_layout(info, n_ctx, n_ubatch=n_ubatch, swa_full=s.swa_full, type_k=s.type_k, type_v=s.type_v)
    formatter: Any = None
    template_stop: tuple[str, ...] = ()
    template = info.chat_template
    if template:
        try:
            formatter = Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text)
            template_stop = (eos_text,) if eos_text else ()
        except Exception as exc:  # a template jinja2 cannot compile: fall back, say so
            log.warning("chat template of %s does not compile (%s); using a plain transcript", req.path, exc)
            emit(P.LogLine("warning", f"The model's chat template does not compile ({exc}); using a plain transcript."))
            template = None
    # Nodes of one ubatch's graph, for progress inside a prefill slice (refined by the
    # first full slice): the reserve graph llama.cpp logs at load has the same shape.
    nodes_per_ubatch = llama_log.graph_nodes()
    loaded = LoadedModel(
        llm=llm,
        info=info,
        settings=settings,
        n_ctx=n_ctx,
        layout=layout,
        vocab=vocab,
        prompt=PromptBuilder(
            llm, vocab, formatter, template_stop, n_ctx, info.context_length, bos_text=bos_text, eos_text=eos_text
        ),
        prefiller=Prefiller(llm, n_batch, n_ubatch, cancel, emit, nodes_per_ubatch),
        inspector=Inspector(llm, vocab),
        funnel_vocab=Vocab(llm.model),
        token_inspector=TokenInspector(llm, info, Vocab(llm.model), n_threads_batch),
        rpc=link,
        speculator=speculator,
    )
    event = P.ModelLoaded(
        request_id=req.request_id,
        info=info,
        settings=settings,
        n_ctx=n_ctx,
        n_batch=n_batch,
        n_threads=n_threads,
        n_threads_batch=n_threads_batch,
        gpu_offload=gpu,
        load_s=time.perf_counter() - t0,
        kv_allocated_bytes=layout.allocated_bytes,
        kv_layout=layout,
        kv_reported_bytes=llama_log.kv_buffer_bytes(),
        compute_reported_bytes=llama_log.compute_buffer_bytes(),
        flash_attn_active=flash_attn_active,
        chat_template=template,
        bos_text=bos_text,
        eos_text=eos_text,
        eog_token_ids=tuple(sorted({t for t in (vocab.eos, vocab.eot) if t >= 0})),
        add_bos=vocab.add_bos,
        placement=link.placement([line for _, line in llama_log.since_mark()], info.n_layer),
        rpc_load_sent_bytes=link.sample()[0],
        speculation=spec,
        draft=speculator.draft if speculator is not None else None,
    )
    return loaded, event


def _connect_rpc(servers: Sequence[str]) -> rpc.RpcLink:
    """The RPC link for a load on ``servers`` (:func:`app.engine.rpc.connect`).

    Raises:
        EngineError: ``rpc``, with the server and what to do.
    """
    try:
        return rpc.connect(servers)
    except RpcError as exc:
        raise EngineError(P.FailureKind.RPC, exc.message) from None
