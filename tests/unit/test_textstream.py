"""UTF-8 safe streaming and stop strings (cases E1, E2) on exact byte pieces."""

from __future__ import annotations

from app.core.chat.textstream import TextStream


def _stream(pieces, stops=()):
    s = TextStream(stops)
    shown = [s.push(p).text for p in pieces]
    shown.append(s.finish().text)
    return s, shown


def test_e1_emoji_split_across_two_tokens():
    s, shown = _stream([b"Nice ", b"\xf0\x9f", b"\x91\x8d", b"!"])
    assert all("\ufffd" not in piece for piece in shown)
    assert "".join(shown) == s.text == "Nice 👍!"
    assert s.text.count("👍") == 1
    assert shown[1] == ""  # nothing shown until the character is whole


def test_e2_cjk_character_split_with_punctuation():
    data = "リンゴ。".encode()
    # one token ends inside ゴ, the next carries its last bytes plus "。"
    pieces = [data[:7], data[7:]]
    _s, shown = _stream(pieces)
    assert "".join(shown) == "リンゴ。" and "\ufffd" not in "".join(shown)


def test_e2_leading_space_sharing_a_token_with_a_split_character():
    data = " ゴ".encode()
    _s, shown = _stream([data[:2], data[2:]])
    assert "".join(shown) == " ゴ"


def test_stop_string_split_across_tokens_is_never_shown():
    s, shown = _stream([b"Hello", b" Us", b"er:", b" more"], stops=["User:"])
    assert s.stopped
    assert "".join(shown) == "Hello "
    assert "Us" not in "".join(shown)


def test_held_back_prefix_is_released_when_it_is_not_a_stop():
    s, shown = _stream([b"a <", b"b>"], stops=["<|im_end|>"])
    assert not s.stopped
    assert shown[0] == "a " and "".join(shown) == "a <b>"


def test_incomplete_bytes_at_the_end_become_one_replacement():
    s, _shown = _stream([b"ok \xf0\x9f"])
    assert s.text == "ok \ufffd"
