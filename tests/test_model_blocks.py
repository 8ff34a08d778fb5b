"""perf_model.Model.blocks: every catalog model as typed blocks, agreeing block by block with what the Model's
fields say (its layer kinds, experts, KV elements per token and recurrent state)."""

import pytest

import perf_model as pm
from enginelab import blocks as b


@pytest.mark.parametrize("key", sorted(pm.MODELS))
def test_catalog_blocks_match_the_fields(key):
    m = pm.MODELS[key]
    assert len(m.blocks) == m.num_hidden_layers
    for il, blk in enumerate(m.blocks):
        assert isinstance(blk.mixer, b.Recurrent) == m.is_recurrent_layer(il)
        assert isinstance(blk.ffn, b.MoEFFN) == m.is_moe_layer(il)
        if isinstance(blk.mixer, b.Attention):
            assert (blk.mixer.window > 0) == m.is_swa_layer(il)
            k, v = b.kv_elements_per_token(blk)
            assert k + v == pm.kv_elements_per_token_layer(m)
        else:
            assert b.state_elements(blk) == pm.recurrent_state_elements(m)
    assert m.block_model.globals.tied_output == m.tie_word_embeddings


def test_blocks_are_carried_when_given():
    from enginelab import arch_config as ac

    bm = ac.read_config(
        {
            "model_type": "llama",
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 128,
            "vocab_size": 100,
        }
    )
    m = pm.Model("t", "llama", 2, 64, 128, 4, 2, 100, carried_blocks=bm)
    assert m.block_model is bm
    with pytest.raises(ValueError, match="^carried_blocks:"):
        pm.Model("t", "llama", 3, 64, 128, 4, 2, 100, carried_blocks=bm)
    with pytest.raises(ValueError, match="^carried_blocks:"):
        pm.Model("t", "llama", 2, 64, 128, 4, 2, 100, carried_blocks="blocks")
