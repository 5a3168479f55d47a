"""The vocabulary fingerprint a logit bias is kept with: real vocabularies told apart, kept in the
stored settings, and left out of what presets compare."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import gguf

from app.core.gguf.gguf_info import VOCAB_HEAD_TOKENS, read_gguf_info
from app.core.sampling.bias_vocabulary import fingerprint_size, vocabulary_fingerprint
from app.core.sampling.params import PRESETS, SamplerSettings, matching_preset, with_preset

BAN = float("-inf")


def test_smollm2_and_gemma_have_different_fingerprints_naming_their_sizes(smollm2, gemma):
    smol, gem = read_gguf_info(smollm2), read_gguf_info(gemma)
    a, b = vocabulary_fingerprint(smol), vocabulary_fingerprint(gem)
    assert a != b and a.startswith("49152:") and b.startswith("262144:")
    assert fingerprint_size(a) == 49_152 and fingerprint_size(b) == 262_144 and fingerprint_size("") == 0
    assert vocabulary_fingerprint(read_gguf_info(smollm2)) == a  # stable
    # Id 2 is another token in each: the case a bias by id gets wrong.
    assert smol.token_texts[2] == "<|im_end|>" and gem.token_texts[2] == "<bos>"


def test_the_head_digest_is_the_first_tokens_as_the_llama_cpp_reader_reads_them(smollm2):
    reader = gguf.GGUFReader(smollm2)
    field = reader.fields["tokenizer.ggml.tokens"]
    digest = hashlib.sha256()
    for idx in field.data[:VOCAB_HEAD_TOKENS]:
        raw = bytes(field.parts[idx])
        digest.update(len(raw).to_bytes(8, "little") + raw)
    assert read_gguf_info(smollm2).vocab_head_sha256 == digest.hexdigest()


def test_a_model_without_a_token_list_has_no_fingerprint(smollm2):
    info = read_gguf_info(smollm2)
    assert vocabulary_fingerprint(replace(info, vocab_head_sha256="")) == ""


def test_the_bias_keeps_its_vocabulary_when_stored_and_presets_leave_both_alone():
    s = SamplerSettings(logit_bias=((2, BAN),), logit_bias_vocab="49152:0123456789abcdef")
    d = s.to_dict()
    assert d["logit_bias_vocab"] == "49152:0123456789abcdef"
    assert SamplerSettings.from_dict(d) == s
    assert "logit_bias_vocab" not in SamplerSettings().to_dict()  # the stored form is as before without one
    assert SamplerSettings.from_dict({**d, "logit_bias": []}).logit_bias_vocab == ""  # no bias: no tie
    for name in PRESETS:
        p = with_preset(s, name)
        assert (p.logit_bias, p.logit_bias_vocab) == (s.logit_bias, s.logit_bias_vocab)
        assert matching_preset(p) == name
