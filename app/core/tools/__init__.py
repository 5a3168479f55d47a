"""Tool calls: OpenAI's ``tools`` / ``tool_choice`` as plain values, the constraint that forces a
call, reading the calls a model writes, and whether a chat template offers tools.

Used by the local API (``app/server``) and the window's MCP tools; plain Python (no Qt, no llama.cpp).
"""
