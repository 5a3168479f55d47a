"""A chat with a JSON schema as its output format, on the real engine and SmolLM2 (issue 23 §1): the
dialog's Check runs llama.cpp's parser, and the chat's reply is JSON that validates."""

from __future__ import annotations

import json

import jsonschema

from app.core.constraint.model import ConstraintKind
from app.ui.constraint.dialog import KINDS
from tests.support.window import send

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 16}, "legs": {"type": "integer"}},
    "required": ["name", "legs"],
}


def test_a_json_schema_chat_replies_with_json_that_validates(qtbot, window):
    dlg = window.output_format.open_dialog()
    dlg.kind.setCurrentIndex([k for k, _ in KINDS].index(ConstraintKind.JSON_SCHEMA))
    dlg.editor.setPlainText(json.dumps(SCHEMA, indent=2))
    dlg.check_button.click()
    qtbot.waitUntil(lambda: dlg.verdict.text().startswith("✓"), timeout=10_000)
    dlg.ok_button.click()
    qtbot.waitUntil(lambda: window.output_format.dialog is None, timeout=10_000)
    assert window.output_format.chip.text() == "{ } JSON schema"
    done = send(qtbot, window, "Describe an animal.")
    jsonschema.validate(json.loads(done.text), SCHEMA)
