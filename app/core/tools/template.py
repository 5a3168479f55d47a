"""Tools and the chat template: whether a template offers tools, and the words that offer them
to a model whose template does not.

A chat template offers tools when its Jinja source reads the ``tools`` variable (Qwen 2.5, Hermes,
Llama 3.1, Mistral's templates do; SmolLM2's and Gemma 3's do not). llama.cpp goes one step
further (common/jinja/caps.cpp renders a probe tool and checks that its name is used); reading
the source finds the same templates without rendering anything.
"""

from __future__ import annotations

import functools
import json
import re

from app.core.tools.spec import ToolSpec

_JINJA_CODE = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.DOTALL)
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")
_TOOLS = re.compile(r"(?<![\w.])tools\b")


@functools.lru_cache(maxsize=16)  # asked at every render (a few templates in use at a time)
def template_supports_tools(source: str | None) -> bool:
    """Whether a chat template's Jinja source uses the ``tools`` variable (outside string literals).

    Args:
        source: the template (Jinja2 source); None or "" (no template: the plain transcript) is False.
    """
    if not source:
        return False
    for m in _JINJA_CODE.finditer(source):
        code = _STRING.sub("''", m.group(1) or m.group(2) or "")
        if _TOOLS.search(code):
            return True
    return False


def tools_system_prompt(tools: tuple[ToolSpec, ...]) -> str:
    """A system message that describes ``tools`` to a model whose template cannot, and the
    shape of a call (the one :func:`~app.core.tools.forced.forced_call_constraint` enforces).

    In the spirit of llama.cpp's generic tool format (common/chat.cpp), which also lists the tools
    in the system message when the template has no place for them.
    """
    listed = "\n".join(json.dumps(t.openai()["function"], ensure_ascii=False) for t in tools)
    return (
        'You can call these tools (JSON schema of each one\'s arguments under "parameters"):\n'
        f"{listed}\n"
        'To call a tool, answer with only a JSON object: {"name": <the tool\'s name>, "arguments": '
        "<an object matching its parameters>}."
    )
