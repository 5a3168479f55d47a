from app.core.exitinfo import describe_exit


def test_signals_are_named_and_explained():
    msg = describe_exit(-4)
    assert "SIGILL" in msg and "CPU instructions" in msg and "GGML_NATIVE=OFF" in msg
    assert "SIGKILL" in describe_exit(-9) and "memory" in describe_exit(-9)
    assert "SIGABRT" in describe_exit(-6) and "GGML_ASSERT" in describe_exit(-6)
    assert "SIGILL" in describe_exit(0xC000001D)  # Windows STATUS_ILLEGAL_INSTRUCTION
    assert describe_exit(3) == "The engine exited with code 3."
