"""enginelab.blocks: the typed blocks, their cache and state per token/sequence (derived by hand from
llama.cpp's formulas), their GGUF tensors, and validation naming the field."""

import pytest

from enginelab import blocks as b


def test_recurrent_state_is_llama_hparams_n_embd_r_and_s():
    # Qwen3.5-9B's gated delta net: conv 4, 16 key heads x 128, 32 value heads x 128
    # n_embd_r = (d_conv - 1) * (d_inner + 2 * n_group * d_state) = 3 * (4096 + 2 * 16 * 128) = 3 * 8192
    # n_embd_s = d_state * d_inner = 128 * 4096
    r = b.Recurrent("gated_delta_net", d_conv=4, d_inner=32 * 128, d_state=128, n_group=16, n_head=32)
    assert (r.conv_elements, r.state_elements) == (24_576, 524_288)
    # Mamba-2 (Nemotron-H): 64 heads x 64 = 4096 inner, 8 groups, state 128: 3 * (4096 + 2 * 8 * 128)
    m = b.Recurrent("mamba2", d_conv=4, d_inner=4096, d_state=128, n_group=8, n_head=64)
    assert (m.conv_elements, m.state_elements) == (3 * 6144, 128 * 4096)
    # Kimi's KDA: 32 heads x 128: the KDA branch 3 * (d_conv - 1) * d_inner and head_dim^2 * n_head
    k = b.Recurrent("kda", d_conv=4, d_inner=4096, d_state=128, n_group=32, n_head=32)
    assert k.conv_elements == 3 * 3 * 4096 == 36_864
    assert k.state_elements == 128 * 128 * 32 == 524_288
    # Mamba-1: no groups: (d_conv - 1) * d_inner
    m1 = b.Recurrent("mamba", d_conv=4, d_inner=5120, d_state=16, n_group=0, n_head=160)
    assert (m1.conv_elements, m1.state_elements) == (3 * 5120, 16 * 5120)


def test_short_conv_state_lfm2():
    # LFM2: n_embd * (l_cache - 1), no recurrent state
    s = b.ShortConv(l_cache=3, width=2048)
    assert b.state_elements(b.Block(s, b.DenseFFN(8192))) == (4096, 0)


def test_kv_per_token_by_kind():
    gqa = b.Block(b.Attention(32, 8, 128, 128), b.DenseFFN(14336))
    assert b.kv_elements_per_token(gqa) == (8 * 128, 8 * 128)
    # MLA: the latent and the rotary key as K, no V (DeepSeek: 512 + 64)
    mla = b.Block(b.Attention(128, 1, 192, 128, kv_lora_rank=512, rope_dim=64), b.NoFFN())
    assert b.kv_elements_per_token(mla) == (576, 0)
    # DSA adds one indexer key of 128 per token
    dsa = b.Block(
        b.Attention(128, 1, 192, 128, kv_lora_rank=512, rope_dim=64, indexer_head_dim=128, n_indexer_head=64),
        b.NoFFN(),
    )
    assert b.kv_elements_per_token(dsa) == (576, 0) and b.indexer_elements_per_token(dsa) == 128
    # a block reading an earlier block's cache keeps nothing
    shared = b.Block(b.Attention(8, 1, 256, 256, kv_shared_from=3), b.DenseFFN(12288))
    assert b.kv_elements_per_token(shared) == (0, 0)
    # K and V of different widths (sized separately for their types)
    assert b.kv_elements_per_token(b.Block(b.Attention(4, 2, 192, 128), b.NoFFN())) == (384, 256)


def test_cache_over_context_and_sequences():
    glob = b.Block(b.Attention(8, 2, 64, 64), b.DenseFFN(256))
    swa = b.Block(b.Attention(8, 2, 64, 64, window=1024), b.DenseFFN(256))
    rec = b.Block(b.Recurrent("gated_delta_net", 4, 256, 64, 2, 4), b.DenseFFN(256))
    bm = b.BlockModel(b.Globals(1000, 512, True), (swa, swa, glob, rec))
    # n_ctx 8192, 1 sequence: the global block keeps 8192 tokens of 128 K + 128 V, each windowed one 1024
    assert b.kv_cache_elements(bm, 8192) == (128 * (8192 + 2 * 1024),) * 2
    # 4 sequences: the global cache is shared (still n_ctx), a window per sequence: min(8192, 4 * 1024)
    assert b.kv_cache_elements(bm, 8192, 4) == (128 * (8192 + 2 * 4096),) * 2
    # RS: (r + s) * 4 bytes per recurrent block per sequence: r = 3 * (256 + 2 * 2 * 64) = 1536, s = 64 * 256
    assert b.state_bytes(bm, 1) == (1536 + 16_384) * 4
    assert b.state_bytes(bm, 3) == 3 * (1536 + 16_384) * 4


def test_tensors_of_a_tiny_dense_model_by_hand():
    # 2 blocks, n_embd 64, 4 heads x 16 (2 KV heads), FFN 128, vocab 100, untied
    blk = b.Block(b.Attention(4, 2, 16, 16), b.DenseFFN(128))
    bm = b.BlockModel(b.Globals(100, 64, False), (blk, blk))
    per_block = 64 + 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 64 + 3 * 64 * 128  # norms, q, k, v, o, ffn
    assert b.weight_elements(bm) == 2 * 100 * 64 + 64 + 2 * per_block
    names = [n for n, _ in b.tensors(bm)]
    assert "output.weight" in names and "blk.1.ffn_gate.weight" in names
    tied = b.BlockModel(b.Globals(100, 64, True), (blk, blk))
    assert b.weight_elements(tied) == b.weight_elements(bm) - 100 * 64


def test_moe_active_weights_count_used_experts_only():
    n_embd = 64
    f = b.MoEFFN(8, 2, 32, n_shared=1, shared_width=32)
    blk = b.Block(b.NoMixer(), f)
    # norm 64, router 64 * 8, experts 3 x 64 x 32 per expert (2 of 8 read), shared 3 x 64 x 32
    assert b.active_weight_elements(blk, 0, n_embd) == 64 + 64 * 8 + 2 * 3 * 64 * 32 + 3 * 64 * 32


def test_attention_and_state_work_terms():
    att = b.Block(b.Attention(8, 2, 64, 64), b.NoFFN())
    assert b.attention_flops_per_token(att, 1000) == 2 * 8 * 128 * 1000
    rec = b.Block(b.Recurrent("mamba2", 4, 256, 16, 1, 4), b.NoFFN())
    r, s = 3 * (256 + 32), 16 * 256
    assert b.state_traffic_bytes_per_token(rec) == 2 * (r + s) * 4
    assert b.scan_flops_per_token(rec) == 4 * s + 2 * r


def test_blocks_are_hashable_and_frozen():
    a = b.Attention(8, 2, 64, 64)
    assert hash(a) == hash(b.Attention(8, 2, 64, 64))
    with pytest.raises(AttributeError):
        a.n_head = 4


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: b.Attention(0, 1, 64, 64), "n_head"),
        (lambda: b.Attention(8, 3, 64, 64), "n_head_kv"),
        (lambda: b.Attention(8, 2, 10**9, 64), "head_dim_k"),
        (lambda: b.Attention(8, 2, 64, 64, window=-1), "window"),
        (lambda: b.Attention(8, 2, 64, 64, chunked=True), "chunked"),
        (lambda: b.Attention(8, 1, 192, 128, kv_lora_rank=512), "rope_dim"),
        (lambda: b.Attention(8, 2, 64, 64, indexer_head_dim=128), "n_indexer_head"),
        (lambda: b.Attention(8, 2, True, 64), "head_dim_k"),
        (lambda: b.Recurrent("lstm", 4, 256, 16, 1, 4), "kind"),
        (lambda: b.Recurrent("mamba2", 4, 250, 16, 1, 4), "d_inner"),
        (lambda: b.Recurrent("kda", 4, 4096, 128, 16, 32), "d_inner"),
        (lambda: b.ShortConv(1, 64), "l_cache"),
        (lambda: b.MoEFFN(8, 9, 32), "n_expert_used"),
        (lambda: b.MoEFFN(8, 2, 32, n_shared=1), "shared_width"),
        (lambda: b.DenseFFN(2.5), "width"),
        (lambda: b.Block("attention", b.NoFFN()), "mixer"),
        (lambda: b.Globals(0, 64, True), "vocab"),
        (lambda: b.BlockModel(b.Globals(10, 64, True), ()), "blocks"),
        (
            lambda: b.BlockModel(
                b.Globals(10, 64, True), (b.Block(b.Attention(4, 1, 16, 16, kv_shared_from=0), b.NoFFN()),)
            ),
            "kv_shared_from",
        ),
        (lambda: b.BlockModel(b.Globals(10, 64, True), (b.Block(b.ShortConv(3, 32), b.NoFFN()),)), "width"),
    ],
)
def test_bad_values_name_the_field(make, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        make()


def test_describe():
    assert b.describe(b.Block(b.Attention(8, 2, 64, 64, window=1024), b.MoEFFN(128, 8, 704))) == (
        "attention (sliding 1024) + MoE 8/128"
    )
    assert b.describe(b.Block(b.ShortConv(3, 64), b.DenseFFN(256))) == "short conv + dense 256"
