"""The Models page's Remote tab on the fake engine: what it says before and without a server.

Against real servers (llama-server, llama-cpp-python's) the tab is tested in tests/remote.
"""

from __future__ import annotations

import socket

from app.core import protocol as P
from app.core.remote import ConnectionFailure
from app.remote.http import RemoteError
from app.ui.models.window import ModelsTab
from tests.support.window import WAIT_MS


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_remote_tab_is_the_models_pages_last(window) -> None:
    window.models.show_tab(ModelsTab.REMOTE)
    assert window.models.tabs.currentWidget() is window.models.remote_tab
    assert window.models.tabs.tabText(ModelsTab.REMOTE.position) == "Remote"


def test_a_bad_address_is_refused_before_any_connection(qtbot, window) -> None:
    tab = window.models.remote_tab
    asked: list[object] = []
    tab.use_requested.connect(asked.append)
    tab.url_field.setText("ftp://files.example.org")
    assert tab.test_connection() is False
    assert tab.status.text() == "✕ 'ftp://files.example.org' is not an http:// or https:// address"
    tab.use_server()
    assert asked == []
    assert window.settings.remote.url == ""  # nothing stored for an address that cannot be used


def test_nothing_listening_is_said_plainly_and_the_key_is_stored_not_shown(qtbot, window) -> None:
    tab = window.models.remote_tab
    port = _closed_port()
    tab.url_field.setText(f"127.0.0.1:{port}")
    tab.key_field.setText("sk-secret-123")
    with qtbot.waitSignal(tab.tested, timeout=WAIT_MS) as blocker:
        assert tab.test_connection()
        assert not tab.test_button.isEnabled()  # one test at a time
    err = blocker.args[0]
    assert isinstance(err, RemoteError) and err.kind is ConnectionFailure.UNREACHABLE
    assert tab.status.text().startswith(f"✕ Nothing answers at 127.0.0.1:{port}")
    assert "sk-secret-123" not in tab.status.text()
    assert tab.test_button.isEnabled()
    assert window.settings.remote.api_key == "sk-secret-123" and window.settings.remote.url == f"127.0.0.1:{port}"


def test_use_this_server_hands_the_endpoint_to_the_window(qtbot, window) -> None:
    tab = window.models.remote_tab
    asked: list[object] = []
    window.models.remote_requested.disconnect(window.use_remote)  # the fake engine has no network side
    window.models.remote_requested.connect(asked.append)
    tab.url_field.setText("gpu-box:8080")
    tab.model_box.setCurrentText("qwen3-32b")
    tab.use_server()
    (endpoint,) = asked
    assert endpoint.base_url == "http://gpu-box:8080/v1" and endpoint.model == "qwen3-32b"


def test_a_new_address_forgets_the_old_servers_models_and_answer(qtbot, window) -> None:
    from app.core.remote import RemoteFacts, ServerKind

    tab = window.models.remote_tab
    tab._test_passed(RemoteFacts("http://127.0.0.1:8765/v1", ServerKind.OPENAI_COMPATIBLE, ("old-model",), "old-model"))
    assert tab.model_box.currentText() == "old-model" and tab.status.text().startswith("✓")
    tab.url_field.setFocus()
    qtbot.keyClicks(tab.url_field, "0")  # the person edits the address
    assert tab.model_box.count() == 0 and tab.status.text() == ""
    tab.model_box.setCurrentText("old-model")  # a model typed that the next server does not list
    tab._test_passed(RemoteFacts("http://127.0.0.1:18391/v1", ServerKind.LLAMA_SERVER, ("smollm2",), "smollm2"))
    assert tab.model_box.currentText() == "smollm2"  # the server's own, not the stale one


def test_this_glassboxs_own_api_is_refused_as_a_remote_engine(qtbot, window) -> None:
    """Its requests would queue behind the reply they are asked for: a hang. The window says so and
    keeps the loaded model."""
    from dataclasses import replace

    from app.core.remote import RemoteEndpoint

    window.settings_ctl.update(server=replace(window.settings_ctl.settings.server, port=0))
    window.server_panel.enabled.click()
    own = window.server.url.replace("127.0.0.1", "localhost")
    loads = len(window.engine.sent(P.LoadModel))
    model = window.engine.model
    window.use_remote(RemoteEndpoint(own, "gb-key", "Tiny-Chat-Q4_1"))
    assert "own local API" in window.banner.text.text()
    assert len(window.engine.sent(P.LoadModel)) == loads and window.engine.model is model
    window.server_panel.enabled.click()
