"""vLLM's and SGLang's KV cache per block (serving_plan section 3b): hybrids, sliding windows, Gemma 4's global
blocks, all derived by hand from the engines' code (vllm/v1/kv_cache_interface.py, kv_cache_utils.py;
SGLang's _handle_max_mamba_cache)."""

import pytest

from enginelab import serving_plan as sp

# Qwen3.6-35B-A3B: 40 blocks, every 4th attention (2 KV heads x 256), 30 gated delta nets with 16 key heads
# and 32 value heads of 128, conv kernel 4; config.json: mamba_ssm_dtype float32
QWEN36_CONV = (4 - 1) * (2 * 16 * 128 + 32 * 128)  # 24,576 conv-state elements, bf16
QWEN36_SSM = 32 * 128 * 128  # 524,288 SSM-state elements, f32
QWEN36_STATE = QWEN36_CONV * 2 + QWEN36_SSM * 4  # 2,146,304 bytes per block and request


def test_vllm_hybrid_matches_a_published_start_up_log():
    # A vLLM v0.17.0 start-up log of this layout (40 layers, 10 full attention with 2 KV heads of 256, fp8 KV
    # cache, 6.08 GiB of KV cache), quoted in "vLLM 로그의 KV cache size 는 용량이 아니다" (2026-08-30):
    #   Setting attention block size to 2096 tokens ...
    #   GPU KV cache size: 159,296 tokens
    #   Maximum concurrency for 65,536 tokens per request: 8.00x
    # attention bytes per token: 2 (K, V) x 2 heads x 256 x 1 (fp8) = 1,024; the state needs
    # cdiv(2,146,304, 16 x 1,024) = 131 blocks of 16 tokens: 2,096 tokens, a page of exactly 2,146,304 bytes.
    assert QWEN36_STATE == 2096 * 1024
    avail = 304 * 10 * QWEN36_STATE + 12345  # 6.08 GiB: 304 blocks of 10 layers
    g = sp.vllm_kv_groups("qwen3.6-35b-a3b", avail, kv_cache_dtype="fp8", max_model_len=65536)
    assert g["block_size"] == 2096 and g["page_size_bytes"] == QWEN36_STATE
    # groups of 10 layers: 1 of full attention, 3 of linear attention
    assert g["kv_groups"] == [{"kind": "full", "groups": 1}, {"kind": "mamba", "groups": 3}]
    assert g["num_gpu_blocks"] == 304
    assert g["gpu_kv_cache_tokens"] == 304 // 4 * 2096 == 159_296
    # one request: cdiv(65,536, 2,096) = 32 attention blocks + 2 ("align") in each linear group
    assert g["blocks_per_request"] == 32 + 3 * 2
    assert g["max_concurrency"] == pytest.approx(8.00, abs=0.005)
    # without prefix caching a state holds one block
    assert (
        sp.vllm_kv_groups("qwen3.6-35b-a3b", avail, kv_cache_dtype="fp8", max_model_len=65536, mamba_cache_mode="none")[
            "blocks_per_request"
        ]
        == 32 + 3
    )


def test_vllm_gemma4_global_blocks_have_their_own_page():
    # Gemma 4 31B: 50 sliding blocks of 16 KV heads x 256 (window 1,024), 10 global of 4 KV heads x 512
    # bf16: sliding 2 x 16 x 256 x 2 = 16,384 bytes per token, global 2 x 4 x 512 x 2 = 8,192
    avail = 10 * 2**30
    g = sp.vllm_kv_groups("gemma-4-31b", avail, max_model_len=32768)
    # the global page (16 x 8,192) is half the sliding one (16 x 16,384): its block size doubles to 32
    assert g["page_size_bytes"] == 16 * 16384 and g["block_size"] == 16
    # 10 layers a group: 1 global group, 5 sliding groups
    assert g["kv_groups"] == [{"kind": "full", "groups": 1}, {"kind": "sliding", "groups": 5}]
    assert g["num_gpu_blocks"] == avail // (16 * 16384) // 10 == 4096
    assert g["gpu_kv_cache_tokens"] == 4096 // 6 * 16
    # a 32,768-token request: cdiv(32,768, 32) global blocks + per sliding group
    # cdiv(min(1,024 - 1 + 2,048, 32,768), 16) + 1 = 193
    assert g["blocks_per_request"] == 1024 + 5 * 193
    plan = sp.vllm_plan("gemma-4-31b", "rtx5090", weight_dtype="awq", max_model_len=32768)
    # every block's token, each at its width: 50 x 16,384 + 10 x 8,192
    assert plan["kv_bytes_per_token"] == 50 * 16384 + 10 * 8192
    assert any("Sliding-window layers keep only their window" in n for n in plan["notes"])


def test_vllm_sliding_window_groups_of_gemma3():
    # Gemma 3 4B: 34 blocks, 29 sliding and 5 global, alike (4 KV heads x 256): group size 5, so 1 global
    # group and cdiv(29, 5) = 6 sliding ones (one padded)
    g = sp.vllm_kv_groups("gemma-3-4b", 8 * 2**30, max_model_len=131072)
    page = 16 * 2 * 4 * 256 * 2
    assert g["page_size_bytes"] == page
    assert g["kv_groups"] == [{"kind": "full", "groups": 1}, {"kind": "sliding", "groups": 6}]
    assert g["num_gpu_blocks"] == 8 * 2**30 // page // 5
    # cdiv(131,072, 16) + 6 x (cdiv(1,024 - 1 + 2,048, 16) + 1)
    assert g["blocks_per_request"] == 8192 + 6 * 193


def test_dense_models_keep_one_group():
    g = sp.vllm_kv_groups("llama-3.1-8b", 4 * 2**30, max_model_len=8192)
    assert g["kv_groups"] == [{"kind": "full", "groups": 1}]
    assert g["num_gpu_blocks"] == 4 * 2**30 // (16 * 2 * 8 * 128 * 2) // 32
    # MLA: the latent (512 + 64) alone, 2 bytes each
    assert sp.vllm_kv_groups("deepseek-v2-lite", 2**30)["page_size_bytes"] == 16 * 576 * 2


def test_sglang_hybrid_splits_the_rest_between_states_and_tokens():
    plan = sp.sglang_plan("qwen3.6-35b-a3b", "rtx5090", weight_dtype="awq", context_length=65536)
    # the cell: 10 attention blocks x 2 x 2 heads x 256 x 2 bytes; a request's state: 30 x 2,146,304
    assert plan["cell_size_bytes"] == 10 * 2 * 2 * 256 * 2
    assert plan["mamba_cache_per_req_bytes"] == 30 * QWEN36_STATE
    rest = plan["static_bytes"] - plan["weights_bytes"]
    reqs = int(rest * 0.9 / 1.9 // (30 * QWEN36_STATE))
    assert plan["max_mamba_cache_size"] == reqs > 0
    assert plan["max_total_num_tokens"] == int((rest - reqs * 30 * QWEN36_STATE) // (10 * 2048))
    assert plan["max_running_requests"] <= reqs // 3
    assert plan["fits"]


def test_hybrid_plans_fit_where_counting_every_layer_did_not():
    # 40 layers counted as attention would need 4x the KV bytes per token of the 10 that are
    p = sp.vllm_plan("qwen3.6-35b-a3b", "rtx5090", weight_dtype="awq", max_model_len=32768)
    assert p["kv_bytes_per_token"] == 10 * 2 * 2 * 256 * 2
    assert p["fits"] and p["effective_block_size"] > 16
    assert p["mamba_state_bytes"] == 30 * QWEN36_STATE
    with pytest.raises(ValueError, match="^mamba_cache_mode:"):
        sp.vllm_kv_groups("qwen3.6-35b-a3b", 2**30, mamba_cache_mode="all")
