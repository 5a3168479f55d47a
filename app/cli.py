"""The command line: ``glassbox [FILE.gguf] [--model PATH] [--no-model] [--debug] [--version] [--self-test]``."""

from __future__ import annotations

import argparse

# The test model the self-test loads when no --model is given (set by packaging/bootstrap.py test).
TEST_MODEL_ENV = "GLASSBOX_TEST_SMOLLM2"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="glassbox", description="Chat with a local GGUF model and watch it work.")
    p.add_argument(
        "file", nargs="?", help="a GGUF file to open (as --model; what a file manager passes)", metavar="FILE.gguf"
    )
    p.add_argument("--model", help="load this GGUF file at start (default: the most recent model)")
    p.add_argument("--no-model", action="store_true", help="start without loading a model")
    p.add_argument("--debug", action="store_true", help="log at DEBUG level, to app.log and to stderr")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument(
        "--self-test",
        action="store_true",
        help=(
            "check this Glassbox headless and exit: offscreen window, engine process, the model opened through "
            "a second start (single instance), a few tokens, TTFT and KV cache figures; prints JSON, exit code 0 "
            f"when all passed. Model: --model, else ${TEST_MODEL_ENV}, else the library's most recent model"
        ),
    )
    args = p.parse_args(argv)
    if args.file and args.model:
        p.error("give the model once: FILE or --model")
    args.model = args.model or args.file
    return args
