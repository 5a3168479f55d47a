"""Which activation llama.cpp's graph gives each architecture's feed-forward network, and its name.

A block's feed-forward is ``down(act(gate(x)) * up(x))`` when the file has a gate
(``ffn_gate``: a "gated linear unit", named after its activation: SwiGLU with SiLU, GeGLU with
GELU, ReGLU with ReLU) and ``down(act(up(x)))`` without one. The file does not say which
activation: llama.cpp's graph builder for the architecture does, in its ``build_ffn`` /
``build_moe_ffn`` calls (src/models/<arch>.cpp in llama-cpp-python 0.3.36's vendored llama.cpp:
``LLM_FFN_SILU`` / ``LLM_FFN_GELU`` / ``LLM_FFN_RELU`` / ``LLM_FFN_RELU_SQR`` /
``LLM_FFN_SWIGLU_OAI_MOE``, with ``LLM_FFN_PAR`` when the gate runs parallel to ``up``;
src/llama-graph.cpp ``build_ffn`` turns SILU + PAR into ``ggml_swiglu_split``, GELU + PAR into
``ggml_geglu_split``). :data:`ACTIVATIONS` lists the architectures (``general.architecture``)
whose builder uses one activation in every such call; the others (several activations by
variant, or a builder of their own) are not named: "gated FFN" / "feed-forward".

:data:`FUSED_GATE_UP` are the architectures whose dense FFN keeps gate and up in one matrix
(``ffn_up`` of ``2 × n_ff`` rows, ``LLM_FFN_SWIGLU`` with ``LLM_FFN_SEQ``): gated although the
file has no ``ffn_gate``.
"""

from __future__ import annotations

import enum


class FfnActivation(str, enum.Enum):
    """The activation of a feed-forward network (llama.cpp's ``llm_ffn_op_type``)."""

    SILU = "silu"  #: LLM_FFN_SILU (and the fused LLM_FFN_SWIGLU)
    GELU = "gelu"  #: LLM_FFN_GELU
    RELU = "relu"  #: LLM_FFN_RELU
    RELU_SQR = "relu_sqr"  #: LLM_FFN_RELU_SQR: relu(x)²
    SWIGLU_OAI = "swiglu_oai"  #: LLM_FFN_SWIGLU_OAI_MOE: gpt-oss's clamped SwiGLU (α 1.702, limit 7)


# From src/models/*.cpp (see the module docstring); an architecture is listed only when every
# build_ffn / build_moe_ffn call of its builder uses the one activation.
ACTIVATIONS: dict[FfnActivation, frozenset[str]] = {
    FfnActivation.SILU: frozenset(
        """afmoe arctic arwkv7 baichuan bailingmoe bailingmoe2 bailingmoe3 bitnet chameleon chatglm cogvlm
        cohere2 cohere2moe command-r dbrx deci deepseek deepseek2 deepseek32 dots1 dots3note dream
        eagle3 ernie4_5 ernie4_5-moe eurobert exaone exaone-moe exaone4 falcon-h1 glm-dsa glm4
        glm4moe glm5-next granite granite_swa granitehybrid grovemoe hrm_text hunyuan-moe hunyuan_vl
        hy_v3 hy_v4 internlm2 jais jamba kimi-linear laguna lfm2 llada llada-moe llama llama4
        maincoder maple mellum mimo2 minicpm3 minimax-01 minimax-m2 mistral3 muse-glimmer nanbeige
        neo-bert olmo olmo2 olmoe openelm orion paddleocr pangu-embedded phi3 plamo plamo2 plamo3
        qwen qwen2 qwen2moe qwen2vl qwen3 qwen35 qwen35moe qwen3moe qwen3next qwen3vl qwen3vlmoe
        qwen4exp refact rnd1 rwkv6qwen2 seed_oss smollm3 stablelm step35 talkie xverse""".split()  # noqa: SIM905
    ),
    FfnActivation.GELU: frozenset(
        """bloom codeshell falcon gemma gemma-embedding gemma2 gemma3 gemma4 gemma4-assistant gpt2 gptneox grok
        mpt phi2 pockettts spark2_5 starcoder starcoder2 wavtokenizer-dec""".split()  # noqa: SIM905
    ),
    FfnActivation.RELU: frozenset({"smallthinker"}),
    FfnActivation.RELU_SQR: frozenset({"arcee", "jais2", "nemotron", "nemotron_h", "nemotron_h_moe", "plm"}),
    FfnActivation.SWIGLU_OAI: frozenset({"gpt-oss", "minimax-m3"}),
}
FUSED_GATE_UP = frozenset({"chatglm", "glm4", "neo-bert", "phi3", "plamo2", "plamo3"})

_GATED = {
    FfnActivation.SILU: "SwiGLU (SiLU-gated)",
    FfnActivation.GELU: "GeGLU (GELU-gated)",
    FfnActivation.RELU: "ReGLU (ReLU-gated)",
    FfnActivation.RELU_SQR: "gated by squared ReLU",
    FfnActivation.SWIGLU_OAI: "SwiGLU, gpt-oss's clamped variant",
}
_PLAIN = {
    FfnActivation.SILU: "SiLU",
    FfnActivation.GELU: "GELU",
    FfnActivation.RELU: "ReLU",
    FfnActivation.RELU_SQR: "squared ReLU",
    FfnActivation.SWIGLU_OAI: "SwiGLU, gpt-oss's clamped variant",
}


def ffn_activation(arch: str) -> FfnActivation | None:
    """The activation llama.cpp builds ``arch``'s feed-forward with (None: not one known activation)."""
    return next((act for act, archs in ACTIVATIONS.items() if arch in archs), None)


def ffn_name(arch: str, gated: bool) -> str:
    """The feed-forward's name for ``arch`` (``general.architecture``).

    Args:
        gated: the file has a gate tensor (``ffn_gate``, ``ffn_gate_exps``, ``ffn_gate_shexp``).

    Returns:
        ``"SwiGLU (SiLU-gated)"`` (llama and family), ``"GeGLU (GELU-gated)"`` (gemma, gemma2,
        gemma3), ``"GELU"`` (gpt2, ungated), ...; ``"gated FFN"`` / ``"feed-forward"`` for an
        architecture not in :data:`ACTIVATIONS`.
    """
    act = ffn_activation(arch)
    gated = gated or arch in FUSED_GATE_UP
    if act is None:
        return "gated FFN" if gated else "feed-forward"
    return (_GATED if gated else _PLAIN)[act]
