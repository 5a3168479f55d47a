"""What a dead engine process's exit code means, in words a person can act on."""

from __future__ import annotations

import signal

# Why llama.cpp usually dies of each signal.
_SIGNAL_MEANING = {
    "SIGILL": "this llama.cpp build uses CPU instructions this machine lacks (for example AVX-512 or AMX). "
    'Rebuild llama-cpp-python with CMAKE_ARGS="-DGGML_NATIVE=OFF" (the Glassbox default)',
    "SIGSEGV": "llama.cpp crashed reading memory it should not (a bug, or a damaged model file)",
    "SIGABRT": "llama.cpp stopped itself on a failed check (GGML_ASSERT), often a model this build does not support",
    "SIGKILL": "the process was killed from outside, most often by the system for running out of memory. "
    "Try a smaller n_ctx or a smaller quant",
    "SIGBUS": "the model file changed or shrank while it was loaded (it is memory-mapped)",
    "SIGFPE": "llama.cpp hit an arithmetic fault (a bug or a damaged model)",
    "SIGTERM": "the process was asked to end from outside",
}

# Windows NTSTATUS exit codes with the same meanings.
_WINDOWS_CODES = {
    0xC000001D: "SIGILL",
    0xC0000005: "SIGSEGV",
    0xC0000409: "SIGABRT",
    0xC0000017: "SIGKILL",  # STATUS_NO_MEMORY
}


def describe_exit(exitcode: int | None) -> str:
    """One sentence on why the engine ended, from ``multiprocessing.Process.exitcode``.

    Negative codes are signals on POSIX (``-4`` is SIGILL). Returns e.g.
    ``"The engine was killed by SIGILL: this llama.cpp build uses CPU instructions ..."``.
    """
    if exitcode is None:
        return "The engine stopped answering."
    name = None
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
    elif (exitcode & 0xFFFFFFFF) in _WINDOWS_CODES:
        name = _WINDOWS_CODES[exitcode & 0xFFFFFFFF]
    if name is not None:
        meaning = _SIGNAL_MEANING.get(name)
        if meaning:
            return f"The engine was killed by {name}: {meaning}."
        return f"The engine was killed by {name}."
    if exitcode == 0:
        return "The engine exited."
    return f"The engine exited with code {exitcode}."
