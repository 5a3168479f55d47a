"""The command line of ``glassbox``: a file as a file manager passes it (``glassbox FILE.gguf``) is ``--model``."""

from __future__ import annotations

import pytest

from app import APP_ID
from app.cli import parse_args


def test_a_bare_file_argument_is_the_model_to_open():
    assert parse_args(["/m/a.gguf"]).model == "/m/a.gguf"
    assert parse_args(["--model", "/m/b.gguf"]).model == "/m/b.gguf"
    assert parse_args([]).model is None


def test_the_model_is_given_once(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["/m/a.gguf", "--model", "/m/b.gguf"])
    assert exc.value.code == 2 and "give the model once" in capsys.readouterr().err


def test_self_test_flag_and_its_help_names_the_default_model(capsys):
    assert parse_args(["--self-test"]).self_test is True
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--self-test" in help_text and "$GLASSBOX_TEST_SMOLLM2" in help_text


def test_the_application_id_is_reverse_dns():
    parts = APP_ID.split(".")
    assert len(parts) >= 3 and all(p.isidentifier() for p in parts) and parts[-1] == "Glassbox"
