"""Quants of one model share a key (one header fetch for their fit verdicts); other models do not."""

from app.core.models.hub import model_key


def test_quants_and_parts_of_one_model_share_a_key():
    keys = {
        model_key(n)
        for n in (
            "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
            "Qwen2.5-7B-Instruct-Q8_0-00001-of-00002.gguf",
            "Qwen2.5-7B-Instruct-IQ4_XS.gguf",
            "Q5_K_M/Qwen2.5-7B-Instruct-Q5_K_M.gguf",
        )
    }
    assert keys == {"qwen2-5-7b-instruct"}


def test_different_models_in_one_repo_get_different_keys():
    assert model_key("Qwen2.5-7B-Instruct-Q4_K_M.gguf") != model_key("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf")
    assert model_key("SmolLM2-135M-Instruct.Q4_1.gguf") == "smollm2-135m-instruct"
