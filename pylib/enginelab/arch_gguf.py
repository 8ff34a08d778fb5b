"""arch_gguf: a GGUF header -> blocks.BlockModel, for any architecture, with no allow-list.

Each block's tensors decide its mixer and FFN, as llama.cpp's loaders create them:
  attn_kv_a_mqa                       MLA attention (kv_lora_rank = its width - rope.dimension_count)
  attn_q / attn_qkv (+ attn_k, attn_v) attention; a block from attention.shared_kv_layers' first on reads
                                      an earlier block's cache (any attn_k/attn_v it holds are unread);
                                      no attn_v: V from K's projection
  ssm_conv1d_q/k/v                    Kimi's KDA (kda.head_dim)
  ssm_in + ssm_d, ssm_x               Mamba-2 / Mamba-1 (ssm.*)
  ssm_conv1d + ssm_beta/ssm_ba/ssm_alpha  a gated delta net (ssm.*)
  shortconv.*                         LFM2's short convolution (shortconv.l_cache, else the kernel's width)
  *_exps, ffn_gate_inp, *_shexp       MoE (+ shared experts); ffn_up beside experts: a dense FFN run with them
  ffn_up (+ ffn_gate)                 a dense FFN
The keys give head counts (per-layer arrays too), key/value lengths (and their _swa and _mla forms), the
sliding window and its pattern, expert counts and the state sizes; a number that no key gives is taken from a
tensor's shape, and every such inference (and whatever could not be inferred) is listed in `unknown`.
The MTP blocks of nextn_predict_layers are left out (llama.cpp does not run them in the main pass).

This module imports enginelab.checks, enginelab.blocks and (when a header is read) enginelab.gguf_header.
"""

from __future__ import annotations

from .blocks import (
    MAX_CONTEXT,
    MAX_LAYERS,
    Attention,
    Block,
    BlockModel,
    DenseFFN,
    Globals,
    MoEFFN,
    NoFFN,
    NoMixer,
    Recurrent,
    ShortConv,
)
from .checks import brief, check, is_int

_BIG = 1 << 40

# llama.cpp's sliding-window layouts for files that carry no attention.sliding_window_pattern (llama-model.cpp
# load_hparams: set_swa_pattern per architecture), by GGUF architecture: True where a block uses the window
SWA_PATTERNS = {
    "gemma2": (True, False),
    "gpt-oss": (True, False),
    "gemma3": (True,) * 5 + (False,),
    "llama4": (True,) * 3 + (False,),  # chunked attention on 3 blocks of 4
}
LLAMA4_CHUNK_DEFAULT = 8192  # llama.cpp: n_swa = 8192 for llama4 unless the file sets sliding_window


def _header(source):
    from . import gguf_header as gh  # loaded only when a header is read

    if isinstance(source, gh.GGUFHeader):
        return source
    try:
        return gh.read_gguf(source)
    except (ValueError, TypeError) as e:
        raise ValueError(f"source: {e}") from None
    except OSError as e:
        raise ValueError(f"source: cannot read the file: {e}") from None


class _Keys:
    """The header's {arch}.* keys, each checked when read; errors name the GGUF key."""

    def __init__(self, header, arch: str, n_layer_file: int = 0):
        self.md = header.metadata
        self.arch = arch
        self.n = n_layer_file

    def name(self, suffix: str) -> str:
        return f"{self.arch}.{suffix}"

    def raw(self, suffix: str):
        return self.md.get(self.name(suffix))

    def int(self, suffix: str, default=None, lo: int = 0, hi: int = _BIG) -> int | None:
        v = self.raw(suffix)
        if v is None:
            return default
        check(
            is_int(v) and lo <= v <= hi, self.name(suffix), f"must be an integer from {lo:,} to {hi:,}, got {brief(v)}"
        )
        return int(v)

    def per_layer(self, suffix: str, il: int, default=None, hi: int = _BIG) -> int | None:
        """A key llama.cpp reads with get_key_or_arr: one number for every block, or one per block."""
        v = self.raw(suffix)
        if isinstance(v, list):
            check(len(v) == self.n, self.name(suffix), f"must hold one entry per block ({self.n:,}), got {len(v):,}")
            x = v[il]
            check(is_int(x) and 0 <= x <= hi, self.name(suffix), f"entry {il} must be an integer >= 0, got {brief(x)}")
            return int(x)
        return self.int(suffix, default, hi=hi)

    def swa_flags(self) -> list | None:
        """attention.sliding_window_pattern: one bool per block, or an integer n (n - 1 windowed, then one
        global: llama_hparams::set_swa_pattern)."""
        v = self.raw("attention.sliding_window_pattern")
        if v is None:
            return None
        if isinstance(v, list):
            check(
                len(v) == self.n and all(isinstance(x, bool) for x in v),
                self.name("attention.sliding_window_pattern"),
                f"must hold one bool per block ({self.n:,}), got {brief(v)}",
            )
            return list(v)
        check(
            is_int(v) and 0 <= v <= MAX_LAYERS,
            self.name("attention.sliding_window_pattern"),
            f"must be an integer or one bool per block, got {brief(v)}",
        )
        return [v == 0 or il % v < v - 1 for il in range(self.n)]


def read_gguf_blocks(source) -> BlockModel:
    """The blocks of the model in a GGUF header (bytes, a file object, a path or a parsed GGUFHeader)."""
    h = _header(source)
    arch = h.architecture
    check(
        arch is not None and 0 < len(arch) <= 64,
        "general.architecture",
        f"must name the model's architecture (a string of 1 to 64 characters), got {brief(arch)}",
    )
    k = _Keys(h, arch)
    n_file = k.int("block_count", lo=1, hi=MAX_LAYERS)
    check(n_file is not None, k.name("block_count"), "missing from the GGUF header")
    k.n = n_file
    n_mtp = k.int("nextn_predict_layers", 0, hi=n_file - 1)
    n = n_file - n_mtp
    unknown: list = []
    if n_mtp:
        unknown.append(f"{n_mtp} MTP block(s) (nextn_predict_layers) left out: llama.cpp does not run them")

    by_block: list = [{} for _ in range(n_file)]
    glob: dict = {}
    for t in h.tensors:
        parts = t.name.split(".")
        if parts[0] == "blk" and len(parts) > 2 and parts[1].isascii() and parts[1].isdigit():
            il = int(parts[1])
            check(il < n_file, "tensors", f"{brief(t.name)} names a block beyond block_count ({n_file:,})")
            by_block[il][".".join(parts[2:])] = tuple(t.shape)
        else:
            glob[t.name] = tuple(t.shape)
    check(h.tensors, "tensors", "the GGUF header lists no tensors (is this a vocabulary-only GGUF?)")

    embd = glob.get("token_embd.weight")
    n_embd = k.int("embedding_length", _dim(embd, 0, "token_embd") if embd else None, lo=1)
    check(n_embd is not None, k.name("embedding_length"), "missing from the GGUF header")
    tokens = h.metadata.get("tokenizer.ggml.tokens")
    vocab = (
        len(tokens)
        if isinstance(tokens, list) and tokens
        else k.int("vocab_size", _dim(embd, 1, "token_embd") if embd else None, lo=1)
    )
    check(vocab is not None, k.name("vocab_size"), "missing: no tokenizer.ggml.tokens and no token_embd.weight")
    ple = k.int("embedding_length_per_layer_input", 0)
    if not ple and "per_layer_token_embd.weight" in glob:
        ple = _dim(glob["per_layer_token_embd.weight"], 0, "per_layer_token_embd") // n_file
        unknown.append("per-layer embedding width taken from per_layer_token_embd's shape")
    rf = glob.get("rope_freqs.weight")
    g = Globals(
        vocab=vocab,
        n_embd=n_embd,
        tied_output="output.weight" not in glob,
        per_layer_width=ple,
        rope_freqs=_dim(rf, 0, "rope_freqs") if rf else 0,
    )

    ctx = k.int("context_length", 0, hi=MAX_CONTEXT) or MAX_CONTEXT
    window = min(
        k.int("attention.sliding_window", LLAMA4_CHUNK_DEFAULT if arch == "llama4" else 0, hi=MAX_CONTEXT), ctx
    )
    swa = k.swa_flags()
    if window and swa is None and arch in SWA_PATTERNS:
        pat = SWA_PATTERNS[arch]
        swa = [pat[il % len(pat)] for il in range(n_file)]
    elif window and swa is None:
        swa = [True] * n_file
        unknown.append(
            "attention.sliding_window is set but no sliding_window_pattern: every attention block read as windowed"
        )
    n_shared_kv = k.int("attention.shared_kv_layers", 0, hi=n_file)
    chunked = arch == "llama4"  # the one chunked layout llama.cpp has (LLAMA_SWA_TYPE_CHUNKED)

    blocks = []
    last_cache: dict = {}
    for il in range(n):
        ts = by_block[il]
        is_swa = bool(window and swa and swa[il])
        mixer = _mixer(k, ts, il, n_embd, is_swa, window, chunked, n_file - n_shared_kv, last_cache, unknown)
        ffn = _ffn(k, ts, il, unknown)
        post = _has(ts, "post_attention_norm") and _has(ts, "post_ffw_norm") and not isinstance(ffn, NoFFN)
        norm = "ffn_norm"
        if not isinstance(ffn, NoFFN) and not post and not _has(ts, "ffn_norm") and _has(ts, "post_attention_norm"):
            norm = "post_attention_norm"  # gpt-oss, GLM-4.5, Qwen3-Next name their pre-FFN norm so
        blocks.append(Block(mixer, ffn, post_norms=post, ffn_norm_name=norm, out_scale=_has(ts, "layer_output_scale")))
    return BlockModel(g, tuple(blocks), arch=arch, unknown=tuple(unknown))


def _has(ts: dict, *names) -> bool:
    return any(n + ".weight" in ts or n in ts for n in names)


def _shape(ts: dict, name: str):
    return ts.get(name + ".weight") or ts.get(name)


def _dim(shape, i: int, what: str) -> int:
    """shape[i] of a tensor the reader relies on, or ValueError naming the tensor."""
    check(shape is not None and len(shape) > i, "tensors", f"{what} must have at least {i + 1} dimensions")
    return shape[i]


def _mixer(
    k: _Keys,
    ts: dict,
    il: int,
    n_embd: int,
    is_swa: bool,
    window: int,
    chunked: bool,
    kv_end: int,
    last_cache: dict,
    unknown: list,
):
    if _has(ts, "attn_kv_a_mqa"):
        return _mla(k, ts, il, unknown)
    if _has(ts, "ssm_conv1d_q"):
        hd = k.int("kda.head_dim", lo=1)
        q = _shape(ts, "ssm_conv1d_q")
        d_inner = _dim(q, 2, "ssm_conv1d_q")
        if hd is None:
            hd = k.int("ssm.state_size", lo=1)
        check(hd is not None and d_inner % hd == 0, k.name("kda.head_dim"), f"must divide the conv width {d_inner:,}")
        nh = d_inner // hd
        return Recurrent("kda", _dim(q, 0, "ssm_conv1d_q"), d_inner, hd, nh, nh)
    if _has(ts, "ssm_in", "ssm_conv1d"):
        return _ssm(k, ts, il, unknown)
    if _has(ts, "shortconv.conv"):
        conv = _shape(ts, "shortconv.conv")
        l_cache = k.int("shortconv.l_cache", _dim(conv, 0, "shortconv.conv"), lo=2)
        return ShortConv(l_cache, n_embd)
    if _has(ts, "attn_q", "attn_qkv"):
        return _attention(k, ts, il, n_embd, is_swa, window, chunked, kv_end, last_cache, unknown)
    mixer_like = sorted(x for x in ts if x.split(".")[0].startswith(("attn_", "ssm_", "time_mix")))
    if mixer_like and not all(x.startswith(("attn_norm", "attn_post_norm")) for x in mixer_like):
        unknown.append(f"block {il}: mixer tensors {', '.join(mixer_like)[:120]} not understood: read as no mixer")
    return NoMixer()


def _attention(k, ts, il, n_embd, is_swa, window, chunked, kv_end, last_cache, unknown) -> Attention:
    n_head = k.per_layer("attention.head_count", il, None, hi=1 << 16)
    check(n_head, k.name("attention.head_count"), f"missing or 0 for block {il}, which has attention tensors")
    n_kv = k.per_layer("attention.head_count_kv", il, n_head, hi=1 << 16)
    if is_swa and k.raw("attention.key_length_swa") is not None:
        hk = k.int("attention.key_length_swa", lo=1)
        hv = k.int("attention.value_length_swa", hk, lo=1)
    else:
        hk = k.int("attention.key_length", None, lo=1)
        hv = k.int("attention.value_length", hk, lo=1)
    q = _shape(ts, "attn_q")
    fused = q is None and _has(ts, "attn_qkv")
    q_gate = False
    if hk is None:
        hk = n_embd // n_head
        if q is not None and _dim(q, 1, "attn_q") % n_head == 0:
            hk = q[1] // n_head
        unknown.append(f"block {il}: attention.key_length missing, head width {hk} from attn_q's shape")
        hv = hv or hk
    elif q is not None and _dim(q, 1, "attn_q") == 2 * n_head * hk:
        q_gate = True  # attn_q also holds the output gate (Qwen3-Next, Qwen3.5)
    has_k = _has(ts, "attn_k", "attn_qkv")
    shared_from = -1
    src = last_cache.get(is_swa)
    if il >= kv_end and src is not None:
        # past attention.shared_kv_layers' first block (llama_hparams::has_kv): no cache of its own, whatever
        # projections the file still holds (Gemma 4's E-models keep attn_k and attn_v; llama.cpp never reads them)
        shared_from = src
    elif not has_k:
        check(False, "tensors", f"block {il} has attention without attn_k and no earlier cache to share")
    if n_kv == 0:
        n_kv = n_head
        unknown.append(f"block {il}: attention.head_count_kv is 0 in an attention block: read as head_count")
    att = Attention(
        n_head,
        n_kv,
        hk,
        hv,
        window=window if is_swa else 0,
        chunked=chunked and is_swa,
        kv_shared_from=shared_from,
        q_gate=q_gate,
        v_from_k=has_k and not _has(ts, "attn_v", "attn_qkv"),
        qk_norm=_has(ts, "attn_q_norm"),
        fused_qkv=fused,
        qkv_bias="attn_q.bias" in ts or "attn_qkv.bias" in ts,
        out_bias="attn_output.bias" in ts,
        sinks=_has(ts, "attn_sinks"),
        unused_kv_proj=shared_from >= 0 and has_k,
    )
    if shared_from < 0:
        last_cache[is_swa] = il
    return att


def _mla(k, ts, il, unknown) -> Attention:
    n_head = k.per_layer("attention.head_count", il, None, hi=1 << 16)
    check(n_head, k.name("attention.head_count"), f"missing or 0 for block {il}, which has MLA tensors")
    rope = k.int("rope.dimension_count", None, lo=1)
    check(rope is not None, k.name("rope.dimension_count"), "missing: MLA's rotary key width")
    kv_w = _dim(_shape(ts, "attn_kv_a_mqa"), 1, "attn_kv_a_mqa")
    rank = k.int("attention.kv_lora_rank", max(kv_w - rope, 1), lo=1)
    check(rank + rope == kv_w, k.name("attention.kv_lora_rank"), f"+ rope must be attn_kv_a_mqa's width {kv_w:,}")
    hk = k.int("attention.key_length_mla", None, lo=1)
    hv = k.int("attention.value_length_mla", None, lo=1)
    if hk is None:  # files from before the latent split: key_length is the query head's width
        hk = k.int("attention.key_length", None, lo=1)
        hv = k.int("attention.value_length", hk, lo=1)
        unknown.append(f"block {il}: no key_length_mla: MLA head widths from key_length / value_length")
    check(
        hk is not None and hk > rope, k.name("attention.key_length_mla"), f"must exceed rope.dimension_count ({rope})"
    )
    qa = _shape(ts, "attn_q_a")
    ni = k.int("attention.indexer.head_count", 0)
    di = k.int("attention.indexer.key_length", 0)
    if _has(ts, "indexer.attn_k") and not di:
        di = _dim(_shape(ts, "indexer.attn_k"), 1, "indexer.attn_k")
        unknown.append(f"block {il}: indexer key width from indexer.attn_k's shape")
    if di and not ni and _has(ts, "indexer.proj"):
        ni = _dim(_shape(ts, "indexer.proj"), 1, "indexer.proj")
    return Attention(
        n_head,
        1,
        hk,
        hv,
        kv_lora_rank=rank,
        rope_dim=rope,
        q_lora_rank=_dim(qa, 1, "attn_q_a") if qa else 0,
        indexer_head_dim=di if ni else 0,
        n_indexer_head=ni if di else 0,
    )


def _ssm(k, ts, il, unknown) -> Recurrent:
    conv = _shape(ts, "ssm_conv1d")
    d_conv = k.int("ssm.conv_kernel", _dim(conv, 0, "ssm_conv1d") if conv else None, lo=1)
    d_inner = k.int("ssm.inner_size", None, lo=1)
    d_state = k.int("ssm.state_size", None, lo=1)
    n_group = k.int("ssm.group_count", None, lo=0)
    dt_rank = k.int("ssm.time_step_rank", None, lo=1)
    if _has(ts, "ssm_beta", "ssm_ba", "ssm_alpha"):
        kind = "gated_delta_net"
    elif _has(ts, "ssm_x"):
        kind = "mamba"
        n_group = 0
    else:
        kind = "mamba2"
    for key, v in (("ssm.inner_size", d_inner), ("ssm.state_size", d_state), ("ssm.time_step_rank", dt_rank)):
        check(v is not None, k.name(key), f"missing: block {il} is a recurrent ({kind}) block")
    if n_group is None:
        n_group = 1
        unknown.append(f"block {il}: ssm.group_count missing: read as 1")
    return Recurrent(kind, d_conv, d_inner, d_state, n_group, dt_rank, fused_ba=_has(ts, "ssm_ba"))


def _ffn(k: _Keys, ts: dict, il: int, unknown: list):
    exps = [x for x in ts if "_exps" in x and x.endswith(".weight")]
    if exps or _has(ts, "ffn_gate_inp"):
        down = _shape(ts, "ffn_down_exps")
        check(down is not None and len(down) == 3, "tensors", f"block {il}: experts without a 3-D ffn_down_exps")
        n_exp = k.per_layer("expert_count", il, down[2], hi=1 << 16) or down[2]
        used = k.int("expert_used_count", None, lo=1)
        if used is None:
            used = 1
            unknown.append("expert_used_count missing: read as 1 expert per token")
        merged = _has(ts, "ffn_gate_up_exps")
        n_sh, sw = 0, 0
        up_sh = _shape(ts, "ffn_up_shexp")
        if up_sh is not None:
            sw = _dim(up_sh, 1, "ffn_up_shexp")
            n_sh = k.int("expert_shared_count", 1, lo=1)
        dense = _shape(ts, "ffn_up")
        return MoEFFN(
            n_exp,
            min(used, n_exp),
            down[0],
            n_shared=n_sh,
            shared_width=sw,
            gated=merged or _has(ts, "ffn_gate_exps"),
            dense_width=_dim(dense, 1, "ffn_up") if dense else 0,
            merged_gate_up=merged,
            router_bias="ffn_gate_inp.bias" in ts,
            expert_bias=any(x.endswith("_exps.bias") for x in ts),
            shared_gate=sw > 0 and _has(ts, "ffn_gate_inp_shexp"),
            routing_bias="exp_probs_b.bias" in ts or "exp_probs_b" in ts,
            branch_norms=_has(ts, "pre_ffw_norm_2"),
        )
    up = _shape(ts, "ffn_up")
    if up is not None:
        gate = _has(ts, "ffn_gate")
        width = _dim(up, 1, "ffn_up")
        down = _shape(ts, "ffn_down")
        fused = not gate and down is not None and width == 2 * _dim(down, 0, "ffn_down")
        if fused:
            width, gate = down[0], True  # gate and up in one ffn_up (GLM-4, Phi-3)
        return DenseFFN(width, gated=gate, fused_gate_up=fused)
    return NoFFN()
