"""Read the header of a GGUF model file: its metadata, its tensor list, and their exact sizes.

A GGUF file (the format llama.cpp loads) is one header followed by the raw weights:

    magic "GGUF" | version | tensor_count | metadata_kv_count
    metadata: metadata_kv_count x (key, value type, value)
    tensor infos: tensor_count x (name, n_dims, dims, ggml type, offset)
    padding up to a multiple of `general.alignment` (default 32)
    tensor data: every tensor's bytes, each at its offset from here

The header alone says everything a memory or speed estimate needs: the architecture's
hyper-parameters, and every tensor's shape and quantization type, hence its exact size in bytes.
This module reads only that header, never the weights, so a 40 GB file costs a few megabytes of
reading (in a browser: `File.slice(0, n)`, then `read_gguf(bytes)`).

    >>> header = read_gguf("model.gguf")        # or bytes, or an open binary file    # doctest: +SKIP
    >>> header.architecture, header.hparams()["num_hidden_layers"]
    ('qwen2', 28)
    >>> header.tensors[0]
    GGUFTensor(name='token_embd.weight', shape=(3584, 152064), ggml_type=12, type_name='Q4_K', ...)

Sources, so a reader can check every number here against the real code:
- the format: the GGUF specification, ggml-org/ggml `docs/gguf.md` ("File Structure"), and the reference
  reader ggml-org/llama.cpp `ggml/src/gguf.cpp` (`gguf_init_from_reader`), whose validity checks we mirror;
- the tensor types: `enum ggml_type` in `ggml/include/ggml.h`, the block structs in `ggml/src/ggml-common.h`,
  and the `type_traits` table in `ggml/src/ggml.c` (`blck_size`, `type_size`); cross-checked against the gguf
  Python package's `GGML_QUANT_SIZES` (`gguf-py/gguf/constants.py`) in our tests.

The reader is written for hostile input: every count and length in the file is checked against the bytes
that can actually exist before anything is allocated or looped over, so a header that claims 2^60 tensors or
a 2^40-byte string fails at once with a `ValueError` naming the field and its byte offset.

Pure Python, standard library only: it runs in CPython 3.11+ and in Pyodide.
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from typing import Any

from .ggml import GGML_TYPES_BY_ID, REMOVED_GGML_TYPES, GGMLType

__all__ = [
    "GGMLTypeInfo",
    "GGML_TYPES",
    "GGML_TYPE_IDS",
    "GGUF_VALUE_TYPES",
    "GGUFError",
    "GGUFTruncated",
    "GGUFLimitError",
    "GGUFTensor",
    "GGUFHeader",
    "read_gguf",
    "tensor_n_bytes",
]


# ---------------------------------------------------------------------------------------------------------------
# 1. Constants of the format, and the limits we impose on hostile files
# ---------------------------------------------------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"  # docs/gguf.md: "Must be `GGUF` at the byte level: 0x47 0x47 0x55 0x46"
GGUF_DEFAULT_ALIGNMENT = 32  # gguf.h GGUF_DEFAULT_ALIGNMENT; overridden by the `general.alignment` key (uint32)
GGML_MAX_DIMS = 4  # ggml.h GGML_MAX_DIMS: a tensor has at most 4 dimensions
GGML_MAX_NAME = 64  # docs/gguf.md: a tensor name "must be at most 64 bytes long" (ggml.h GGML_MAX_NAME)
GGUF_MAX_KEY_BYTES = 65535  # docs/gguf.md: a metadata key "must be at most 2^16-1/65535 bytes long"
INT64_MAX = 2**63 - 1  # gguf.cpp reads dims as int64_t and rejects element counts that overflow it

# Our own limits (not in the format): they bound memory and time whatever the file claims.
DEFAULT_MAX_HEADER_BYTES = 256 * 1024 * 1024
# Real headers are far smaller: the largest are vocabularies, e.g. a 262,144-token vocabulary with its
# scores and token types is about 8 MB.
DEFAULT_MAX_ARRAY_ITEMS = 1 << 22
# Total elements over all metadata arrays (4,194,304). The biggest real ones are vocabularies: 262,144
# tokens with their scores and types (Gemma 3), or ~150k-200k tokens plus as many BPE merges: under a
# million elements. Each element becomes a Python object, so this caps memory (in CPython ~180 MB for a
# hostile header of 4 million large integers) and time (~1-3 s for 4 million empty strings).
MAX_ARRAY_DEPTH = 8  # arrays may nest (docs/gguf.md: "Arrays can be nested"); no real file nests more than 1
MAX_NESTED_ARRAYS = 1 << 16
# Arrays inside arrays, per header. gguf.cpp cannot load them at all (it rejects an array of arrays),
# so real models have none; each costs a few microseconds, so we allow 65,536.


# ---------------------------------------------------------------------------------------------------------------
# 2. The ggml tensor types: id, name, weights per block, bytes per block
# ---------------------------------------------------------------------------------------------------------------

# The table is enginelab.ggml's (one table for the reader and the size model); the names here are the
# reader's public API.
GGMLTypeInfo = GGMLType
GGML_TYPES: dict[int, GGMLType] = GGML_TYPES_BY_ID  # by id, as a file names them
GGML_TYPE_IDS: dict[str, int] = {info.name: type_id for type_id, info in GGML_TYPES.items()}
_REMOVED_GGML_TYPES = REMOVED_GGML_TYPES


def tensor_n_bytes(shape: tuple[int, ...] | list[int], ggml_type: int) -> int:
    """Exact bytes of a tensor, as ggml_nbytes(): rows x (row length / block_size x type_size).

    `shape` is in ggml order (ne[0] first: the row length, the fastest-varying dimension).
    """
    info = GGML_TYPES[ggml_type]
    n_per_row = shape[0] if shape else 1
    n_rows = 1
    for dim in shape[1:]:
        n_rows *= dim
    return n_rows * info.row_bytes(n_per_row)


# ---------------------------------------------------------------------------------------------------------------
# 3. The metadata value types (docs/gguf.md `enum gguf_metadata_value_type`)
# ---------------------------------------------------------------------------------------------------------------

GGUF_VALUE_TYPES: dict[int, str] = {
    0: "UINT8",
    1: "INT8",
    2: "UINT16",
    3: "INT16",
    4: "UINT32",
    5: "INT32",
    6: "FLOAT32",
    7: "BOOL",
    8: "STRING",
    9: "ARRAY",
    10: "UINT64",
    11: "INT64",
    12: "FLOAT64",
}
_STRING, _ARRAY, _BOOL = 8, 9, 7

# struct format letter of each fixed-size value type (all little-endian unless the file is big-endian)
_SCALAR_FORMATS: dict[int, str] = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "B",
    10: "Q",
    11: "q",
    12: "d",
}
_SCALAR_SIZES: dict[int, int] = {t: struct.calcsize("<" + f) for t, f in _SCALAR_FORMATS.items()}

# The fewest bytes each element can take, used to reject impossible counts before looping:
# a string is at least its 8-byte length, a nested array at least its 4-byte type and 8-byte length.
_MIN_VALUE_BYTES = {**_SCALAR_SIZES, _STRING: 8, _ARRAY: 4 + 8}
_MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, a key of >= 1 byte, value type, a value of >= 1 byte
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, ggml type, offset (name and dims may be empty)


# ---------------------------------------------------------------------------------------------------------------
# 4. Errors: all are ValueError, so callers can catch just that
# ---------------------------------------------------------------------------------------------------------------


class GGUFError(ValueError):
    """The bytes are not a valid GGUF header. `offset` is the byte where the problem is, if known."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


class GGUFTruncated(GGUFError):
    """The header goes on past the bytes we were given.

    `needed_bytes`: how long a prefix of the file is needed, at least (None if not knowable).
    `available_bytes`: how many bytes we had.
    `end_of_file`: True if those bytes were the whole file (a file object that hit its end, or `file_size`
    was given and reached), so reading more cannot help: the file is cut short or a length in it is corrupt.
    A browser caller with `end_of_file` False reads a bigger slice, at least `needed_bytes`, and retries.
    """

    def __init__(
        self, message: str, offset: int | None, needed_bytes: int | None, available_bytes: int, end_of_file: bool
    ):
        super().__init__(message, offset)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.end_of_file = end_of_file


class GGUFLimitError(GGUFError):
    """The header claims more than our limits allow (max_header_bytes, array items, nesting depth).

    For a real model this means the limit is too small for it; for anything else, the file is corrupt.
    """


# ---------------------------------------------------------------------------------------------------------------
# 5. What we return
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor info of the header (docs/gguf.md `gguf_tensor_info_t`).

    `shape` is in ggml order, ne[0] first: the row length comes first, so `token_embd.weight` is
    (n_embd, n_vocab), the reverse of PyTorch's (n_vocab, n_embd).
    `offset` is relative to the start of the tensor data (`GGUFHeader.data_offset`), as stored in the file.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: int  # enum ggml_type id, a key of GGML_TYPES
    type_name: str  # e.g. "Q4_K"
    offset: int
    n_elements: int
    n_bytes: int  # exact, as ggml_nbytes(): rows x (ne[0] / block_size) x type_size


@dataclass(frozen=True)
class GGUFHeader:
    """Everything in a GGUF file before its tensor data."""

    version: int  # 2 or 3
    byte_order: str  # "little" (nearly every file) or "big"
    alignment: int  # `general.alignment`, default 32
    metadata: dict[str, Any]  # key -> int | float | bool | str | list (arrays, possibly nested)
    metadata_types: dict[str, str]  # key -> "UINT32", "STRING", "ARRAY[STRING]", "ARRAY[ARRAY]", ...
    tensors: list[GGUFTensor]
    header_bytes: int  # where the tensor infos end
    data_offset: int  # where the tensor data starts: header_bytes rounded up to `alignment`
    file_size: int | None = None  # the file's size if it was known (file object, or `file_size=` given)

    @property
    def architecture(self) -> str | None:
        """`general.architecture`, e.g. "llama", "qwen3moe", "gpt-oss": the prefix of the model's keys."""
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    @property
    def n_elements(self) -> int:
        """Total weights over all tensors (the parameter count, embeddings included)."""
        return sum(t.n_elements for t in self.tensors)

    @property
    def weights_bytes(self) -> int:
        """Total bytes of tensor data, without alignment padding."""
        return sum(t.n_bytes for t in self.tensors)

    def tensor(self, name: str) -> GGUFTensor | None:
        for t in self.tensors:
            if t.name == name:
                return t
        return None

    def file_size_estimate(self) -> int:
        """The file size the header implies: data start + the end of the last tensor, padded to alignment
        (gguf-py's writer pads after every tensor, and gguf.cpp counts each tensor's padded size)."""
        end = 0
        for t in self.tensors:
            end = max(end, t.offset + _align(t.n_bytes, self.alignment))
        return self.data_offset + end

    def hparams(self) -> dict[str, Any]:
        """The model's hyper-parameters under Hugging Face `config.json` names.

        Only what the file says (plus llama.cpp's own defaults, noted below); absent keys are left out.
        Per-layer values (GGUF allows arrays for head counts and FFN sizes) come back as one number when
        all layers agree, else as the per-layer list.
        """
        arch = self.architecture
        md = self.metadata
        out: dict[str, Any] = {}

        def get(suffix: str) -> Any:
            return _uniform(md.get(f"{arch}.{suffix}")) if arch else None

        if arch:
            out["model_type"] = _HF_MODEL_TYPES.get(arch, arch)
        for suffix, hf_name in _HPARAM_KEYS:
            value = get(suffix)
            if value is not None:
                out[hf_name] = value
        if "num_local_experts" in out:
            out["num_experts"] = out["num_local_experts"]  # Qwen-MoE's name for Mixtral's num_local_experts

        # llama.cpp defaults (src/llama-model.cpp load_hparams): n_head_kv = n_head when the key is absent,
        # and n_embd_head_k = n_embd / n_head when key_length is absent. HF configs use the same defaults.
        n_head = out.get("num_attention_heads")
        if "num_key_value_heads" not in out and n_head is not None:
            out["num_key_value_heads"] = n_head
        hidden = out.get("hidden_size")
        if (
            "head_dim" not in out
            and isinstance(n_head, int)
            and n_head > 0
            and isinstance(hidden, int)
            and hidden % n_head == 0
        ):
            out["head_dim"] = hidden // n_head

        # vocabulary: the tokenizer's token list, else {arch}.vocab_size, else the embedding's rows
        tokens = md.get("tokenizer.ggml.tokens")
        embd = self.tensor("token_embd.weight")
        if isinstance(tokens, list):
            out["vocab_size"] = len(tokens)
        elif isinstance(get("vocab_size"), int):
            out["vocab_size"] = get("vocab_size")
        elif embd is not None and len(embd.shape) == 2:
            out["vocab_size"] = embd.shape[1]  # ggml order: (n_embd, n_vocab)
        if embd is not None:
            # no separate output matrix: llama.cpp reuses token_embd for the output projection
            out["tie_word_embeddings"] = self.tensor("output.weight") is None
        return out


# GGUF key (after "{arch}.") -> Hugging Face config.json field. Key names: llama.cpp src/llama-arch.cpp LLM_KV_NAMES.
_HPARAM_KEYS = (
    ("block_count", "num_hidden_layers"),
    ("embedding_length", "hidden_size"),
    ("feed_forward_length", "intermediate_size"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.head_count_kv", "num_key_value_heads"),
    ("attention.key_length", "head_dim"),
    ("attention.value_length", "v_head_dim"),  # DeepSeek's HF name; equals head_dim in most models
    ("context_length", "max_position_embeddings"),
    ("expert_count", "num_local_experts"),
    ("expert_used_count", "num_experts_per_tok"),
    ("expert_feed_forward_length", "moe_intermediate_size"),
    ("expert_shared_count", "n_shared_experts"),
    ("attention.sliding_window", "sliding_window"),
    ("rope.freq_base", "rope_theta"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    # the 2025 architectures (llama-model.cpp load_hparams): MLA, sliding-window layouts, MoE layouts, hybrids
    ("attention.kv_lora_rank", "kv_lora_rank"),
    ("attention.q_lora_rank", "q_lora_rank"),
    ("attention.key_length_mla", "key_length_mla"),  # DeepSeek MLA: qk_nope_head_dim + qk_rope_head_dim
    ("attention.value_length_mla", "value_length_mla"),  # DeepSeek MLA: v_head_dim
    ("rope.dimension_count", "rope_dimension_count"),
    ("attention.sliding_window_pattern", "sliding_window_pattern"),
    ("leading_dense_block_count", "first_k_dense_replace"),
    ("expert_shared_feed_forward_length", "shared_expert_intermediate_size"),
    ("interleave_moe_layer_step", "interleave_moe_layer_step"),
    ("nextn_predict_layers", "num_nextn_predict_layers"),
    ("full_attention_interval", "full_attention_interval"),
    ("ssm.conv_kernel", "ssm_conv_kernel"),
    ("ssm.inner_size", "ssm_inner_size"),
    ("ssm.state_size", "ssm_state_size"),
    ("ssm.time_step_rank", "ssm_time_step_rank"),
    ("ssm.group_count", "ssm_group_count"),
)

# llama.cpp architecture names that differ from the Hugging Face model_type (convert_hf_to_gguf.py maps
# the HF class to the llama.cpp arch; this is the reverse, for the common cases). Others pass through.
_HF_MODEL_TYPES = {
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "qwen3next": "qwen3_next",
    "gpt-oss": "gpt_oss",
    "gptneox": "gpt_neox",
    "command-r": "cohere",
    "glm4moe": "glm4_moe",
    "deepseek2": "deepseek_v2",  # DeepSeek V2 and V3 (and Kimi K2) share llama.cpp's deepseek2
}


def _uniform(value: Any) -> Any:
    """A per-layer list whose entries are all equal becomes that one value; other values pass through."""
    if isinstance(value, list):
        if value and all(v == value[0] for v in value) and not isinstance(value[0], list):
            return value[0]
        return list(value) if value else None
    return value


def _align(n: int, alignment: int) -> int:
    """docs/gguf.md align_offset(): round n up to a multiple of alignment."""
    return n + (alignment - n % alignment) % alignment


# ---------------------------------------------------------------------------------------------------------------
# 6. The byte source: a bytes-like object, or a file read in growing chunks, never past the limit
# ---------------------------------------------------------------------------------------------------------------


class _Source:
    """The header's bytes, from position 0 of the source. `ensure(end)` makes bytes [0, end) available
    (reading more from a file if needed) or raises: GGUFLimitError past the limit, GGUFTruncated past the data."""

    def __init__(self, source: Any, max_header_bytes: int, file_size: int | None):
        self.limit = max_header_bytes
        self.file = None
        self.file_size = file_size
        if isinstance(source, (bytes, bytearray, memoryview)):
            view = memoryview(source)
            if view.ndim != 1 or view.format != "B":
                view = view.cast("B")  # e.g. a Pyodide memoryview of a typed array: bytes, flat
            # all we will ever have (only up to the limit is looked at); the whole file if it reaches file_size
            self.buf: Any = view[: self.limit] if len(view) > self.limit else view
            self.at_eof = file_size is not None and len(view) >= file_size
        elif hasattr(source, "read"):
            self.file = source
            self.buf = bytearray()  # grows as the parser asks for more
            self.at_eof = False
            if self.file_size is None:
                self.file_size = _remaining_size(source)
        else:
            raise TypeError(
                f"read_gguf needs bytes, bytearray, memoryview, a binary file object or a path, "
                f"not {type(source).__name__}"
            )

    def ensure(self, end: int, what: str, offset: int) -> None:
        if end <= len(self.buf):
            return
        if end > self.limit:
            raise GGUFLimitError(
                f"{what} at byte {offset} would need the header to extend to byte {end:,}, past "
                f"max_header_bytes={self.limit:,}: the file is corrupt (or raise max_header_bytes)",
                offset,
            )
        if self.file_size is not None and end > self.file_size:
            raise GGUFTruncated(
                f"{what} at byte {offset} needs the header to extend to byte {end:,}, but the file is only "
                f"{self.file_size:,} bytes: it is truncated or that count/length is corrupt",
                offset,
                end,
                len(self.buf),
                True,
            )
        if self.file is not None and not self.at_eof:
            # read in doubling chunks (at least 1 MiB), never past the limit, so memory stays O(header)
            target = min(self.limit, max(end, 2 * len(self.buf), 1 << 20))
            while len(self.buf) < target:
                chunk = self.file.read(target - len(self.buf))
                if isinstance(chunk, str):
                    raise TypeError("read_gguf needs a binary file: open it with mode 'rb'")
                if not chunk:
                    self.at_eof = True
                    break
                self.buf += chunk
            if end <= len(self.buf):
                return
        if self.at_eof:
            raise GGUFTruncated(
                f"{what} at byte {offset} needs the header to extend to byte {end:,}, but the file ends at "
                f"byte {len(self.buf):,}: it is truncated or that count/length is corrupt",
                offset,
                end,
                len(self.buf),
                True,
            )
        raise GGUFTruncated(
            f"{what} at byte {offset} needs the first {end:,} bytes of the file, but only {len(self.buf):,} "
            f"were given: read a longer slice and retry",
            offset,
            end,
            len(self.buf),
            False,
        )


def _remaining_size(fileobj: Any) -> int | None:
    """Bytes from the file object's position to its end, if it can tell (seekable files can)."""
    try:
        if not fileobj.seekable():
            return None
        here = fileobj.tell()
        end = fileobj.seek(0, io.SEEK_END)
        fileobj.seek(here)
        return end - here
    except (AttributeError, OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------------------------
# 7. The parser
# ---------------------------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, src: _Source, max_array_items: int, utf8_errors: str):
        self.src = src
        self.pos = 0
        self.e = "<"  # struct byte order prefix
        self.items_left = max_array_items
        self.nested_left = MAX_NESTED_ARRAYS
        self.max_array_items = max_array_items
        self.utf8_errors = utf8_errors

    # -- primitives ---------------------------------------------------------------------------------------------
    def unpack(self, fmt: str, size: int, what: str) -> Any:
        at = self.pos
        self.src.ensure(at + size, what, at)
        self.pos = at + size
        return struct.unpack_from(self.e + fmt, self.src.buf, at)[0]

    def u32(self, what: str) -> int:
        return self.unpack("I", 4, what)

    def u64(self, what: str) -> int:
        return self.unpack("Q", 8, what)

    def string(self, what: str, max_len: int | None = None) -> str:
        """gguf_string_t: uint64 length, then that many UTF-8 bytes (no terminating NUL)."""
        at = self.pos
        n = self.u64(f"length of {what}")
        if max_len is not None and n > max_len:
            raise GGUFError(f"{what} at byte {at} claims {n:,} bytes; the GGUF spec allows at most {max_len:,}", at)
        start = self.pos
        self.src.ensure(start + n, f"{what} ({n:,} bytes)", at)
        self.pos = start + n
        return self.decode(self.src.buf[start : start + n], what, start)

    def decode(self, raw: Any, what: str, at: int) -> str:
        try:
            return str(raw, "utf-8", self.utf8_errors)
        except UnicodeDecodeError as err:
            raise GGUFError(
                f"{what} at byte {at} is not valid UTF-8 ({err.reason} at its byte {err.start})", at
            ) from None

    def take_items(self, n: int, what: str, at: int) -> None:
        """Charge n array elements against the header-wide budget (memory bound), before building them."""
        if n > self.items_left:
            raise GGUFLimitError(
                f"{what} at byte {at} has {n:,} elements, beyond the limit of {self.max_array_items:,} array "
                f"elements per header (max_array_items)",
                at,
            )
        self.items_left -= n

    # -- metadata values ----------------------------------------------------------------------------------------
    def value_type(self, what: str) -> int:
        at = self.pos
        vtype = self.u32(f"value type of {what}")
        if vtype not in GGUF_VALUE_TYPES:
            raise GGUFError(f"{what}: unknown value type {vtype} at byte {at} (GGUF defines 0-12)", at)
        return vtype

    def value(self, vtype: int, what: str, depth: int = 0) -> tuple[Any, str]:
        """Read one value of type vtype; return it and its type description."""
        at = self.pos
        if vtype == _STRING:
            return self.string(f"string value of {what}"), "STRING"
        if vtype != _ARRAY:
            raw = self.unpack(_SCALAR_FORMATS[vtype], _SCALAR_SIZES[vtype], what)
            if vtype == _BOOL:
                if raw > 1:  # docs/gguf.md: "0 is false and 1 is true. Anything else is invalid"
                    raise GGUFError(f"{what}: bool at byte {at} is {raw}, not 0 or 1", at)
                raw = raw == 1
            return raw, GGUF_VALUE_TYPES[vtype]

        # An array: element type (uint32), count (uint64), then the elements, back to back.
        if depth >= MAX_ARRAY_DEPTH:
            raise GGUFLimitError(f"{what}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels at byte {at}", at)
        itype = self.value_type(f"elements of {what}")
        count_at = self.pos
        n = self.u64(f"element count of {what}")
        # Before allocating or looping: every element takes at least _MIN_VALUE_BYTES bytes, so the bytes
        # that must exist are known now. A 2^50-element claim fails here, in constant time.
        self.src.ensure(
            self.pos + n * _MIN_VALUE_BYTES[itype],
            f"array {what} of {n:,} {GGUF_VALUE_TYPES[itype]} elements",
            count_at,
        )
        self.take_items(n, f"array {what}", count_at)
        type_desc = f"ARRAY[{GGUF_VALUE_TYPES[itype]}]"
        if itype in _SCALAR_FORMATS:
            size = _SCALAR_SIZES[itype]
            start = self.pos
            self.pos = start + n * size
            if itype == _BOOL:
                raw = bytes(self.src.buf[start : self.pos])
                if raw.translate(None, b"\x00\x01"):
                    bad = next(i for i, b in enumerate(raw) if b > 1)
                    raise GGUFError(
                        f"{what}: bool element {bad} at byte {start + bad} is {raw[bad]}, not 0 or 1", start + bad
                    )
                return [b == 1 for b in raw], type_desc
            return list(struct.unpack_from(f"{self.e}{n}{_SCALAR_FORMATS[itype]}", self.src.buf, start)), type_desc
        if itype == _STRING:
            return self.string_array(n, what), type_desc
        # nested arrays: each element carries its own element type and count
        if n > self.nested_left:
            raise GGUFLimitError(
                f"array {what} at byte {count_at} holds {n:,} arrays; we allow {MAX_NESTED_ARRAYS:,}"
                f" arrays inside arrays per header (llama.cpp itself loads none)",
                count_at,
            )
        self.nested_left -= n
        out = []
        inner_desc = "ARRAY"
        for i in range(n):
            inner, desc = self.value(_ARRAY, f"{what}[{i}]", depth + 1)
            out.append(inner)
            if i == 0:
                inner_desc = desc  # described by its first element; each may have its own element type
        return out, f"ARRAY[{inner_desc}]"

    def string_array(self, n: int, what: str) -> list[str]:
        """n strings back to back: the hot loop of a vocabulary (150k-260k tokens), so kept tight, with
        error labels built only when an error happens."""
        out = []
        append = out.append
        length = struct.Struct(self.e + "Q").unpack_from
        errors = self.utf8_errors
        buf = self.src.buf
        have = len(buf)
        pos = self.pos
        i = start = 0
        try:
            for i in range(n):
                if pos + 8 > have:
                    self.src.ensure(pos + 8 + 8 * (n - i - 1), f"length of string {i} of {what}", pos)
                    buf, have = self.src.buf, len(self.src.buf)
                start = pos + 8
                pos = start + length(buf, pos)[0]
                if pos > have:
                    self.src.ensure(pos + 8 * (n - i - 1), f"string {i} of {what} ({pos - start:,} bytes)", start - 8)
                    buf, have = self.src.buf, len(self.src.buf)
                append(str(buf[start:pos], "utf-8", errors))
        except UnicodeDecodeError as err:
            raise GGUFError(
                f"string {i} of {what} at byte {start} is not valid UTF-8 ({err.reason} at its byte {err.start})", start
            ) from None
        self.pos = pos
        return out

    # -- the whole header ---------------------------------------------------------------------------------------
    def header(self) -> GGUFHeader:
        src = self.src
        src.ensure(4, "the magic 'GGUF'", 0)
        magic = bytes(src.buf[0:4])
        if magic != GGUF_MAGIC:
            raise GGUFError(f"not a GGUF file: it starts with {magic!r}, not b'GGUF'{_magic_hint(src.buf)}", 0)
        self.pos = 4

        # The version is a uint32. A big-endian file (docs/gguf.md, v3) reads as 0x03000000 here: its low
        # 16 bits are zero, the same test gguf.cpp and gguf-py's reader use.
        version = self.u32("version")
        swapped = struct.unpack(">I", struct.pack("<I", version))[0]
        if version and not version & 0xFFFF and swapped in (2, 3):
            self.e = ">"
            version = swapped
        if version == 1:
            raise GGUFError(
                "GGUF version 1 (2023, uint32 counts and lengths) is not supported, as in llama.cpp "
                "since late 2023: re-convert the model with a current llama.cpp",
                4,
            )
        if version not in (2, 3):
            raise GGUFError(f"unsupported GGUF version {version} at byte 4 (this reader knows versions 2 and 3)", 4)

        # v2 and v3 both use uint64 counts (v3 only added big-endian files). gguf.cpp reads them as int64.
        n_tensors = self.u64("tensor_count")
        n_kv = self.u64("metadata_kv_count")
        for count, name, at in ((n_tensors, "tensor_count", 8), (n_kv, "metadata_kv_count", 16)):
            if count > INT64_MAX:
                raise GGUFError(f"{name} at byte {at} is {count:,}, negative as the int64 gguf.cpp reads", at)
        # The least bytes those counts need; 2^60 tensors fail here, before any loop.
        src.ensure(
            self.pos + n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_INFO_BYTES,
            f"{n_kv:,} metadata entries and {n_tensors:,} tensor infos (counts)",
            8,
        )

        metadata: dict[str, Any] = {}
        types: dict[str, str] = {}
        for i in range(n_kv):
            at = self.pos
            key = self.string(f"key of metadata entry {i}", GGUF_MAX_KEY_BYTES)
            if not key:
                raise GGUFError(f"metadata entry {i} at byte {at} has an empty key", at)
            if key in metadata:
                raise GGUFError(f"duplicate metadata key {key!r} at byte {at}", at)
            vtype = self.value_type(repr(key))
            metadata[key], types[key] = self.value(vtype, repr(key))

        # general.alignment must be a uint32 power of two (gguf.cpp; gguf-py's reader checks the same)
        alignment = GGUF_DEFAULT_ALIGNMENT
        if "general.alignment" in metadata:
            alignment = metadata["general.alignment"]
            if types["general.alignment"] != "UINT32":
                raise GGUFError(f"general.alignment must be a UINT32, not {types['general.alignment']}")
            if alignment <= 0 or alignment & (alignment - 1):
                raise GGUFError(f"general.alignment is {alignment}, not a power of two")

        tensors: list[GGUFTensor] = []
        names: set[str] = set()
        for i in range(n_tensors):
            tensors.append(self.tensor_info(i, alignment, names))

        header_bytes = self.pos
        # docs/gguf.md: padding after the tensor infos "to the nearest multiple of ALIGNMENT"
        data_offset = _align(header_bytes, alignment)
        header = GGUFHeader(
            version=version,
            byte_order="big" if self.e == ">" else "little",
            alignment=alignment,
            metadata=metadata,
            metadata_types=types,
            tensors=tensors,
            header_bytes=header_bytes,
            data_offset=data_offset,
            file_size=src.file_size,
        )
        # If we know the file's size, check the tensor data fits in it: a cut-off download shows up here.
        if src.file_size is not None and tensors:
            data_end = data_offset + max(t.offset + t.n_bytes for t in tensors)
            if data_end > src.file_size:
                last = max(tensors, key=lambda t: t.offset + t.n_bytes)
                raise GGUFTruncated(
                    f"the header places tensor {last.name!r} so that the data ends at byte {data_end:,}, but the "
                    f"file is only {src.file_size:,} bytes: it is truncated (an incomplete download?)",
                    None,
                    data_end,
                    src.file_size,
                    True,
                )
        return header

    def tensor_info(self, i: int, alignment: int, names: set[str]) -> GGUFTensor:
        """docs/gguf.md gguf_tensor_info_t: name, n_dimensions (uint32), dimensions (uint64 each),
        type (ggml_type), offset (uint64, relative to the tensor data, a multiple of ALIGNMENT)."""
        at = self.pos
        name = self.string(f"name of tensor {i}", GGML_MAX_NAME)
        if name in names:
            raise GGUFError(f"duplicate tensor name {name!r} at byte {at}", at)
        names.add(name)
        label = f"tensor {name!r}"

        dims_at = self.pos
        n_dims = self.u32(f"n_dims of {label}")
        if n_dims > GGML_MAX_DIMS:
            raise GGUFError(
                f"{label} at byte {dims_at} has {n_dims:,} dimensions; ggml allows at most "
                f"{GGML_MAX_DIMS} (GGML_MAX_DIMS)",
                dims_at,
            )
        self.src.ensure(self.pos + 8 * n_dims, f"dimensions of {label}", self.pos)
        shape = struct.unpack_from(f"{self.e}{n_dims}q", self.src.buf, self.pos)
        self.pos += 8 * n_dims
        for j, dim in enumerate(shape):
            if dim < 0:  # gguf.cpp reads dims as int64 and rejects negatives (a uint64 >= 2^63)
                raise GGUFError(
                    f"{label}: dimension {j} at byte {dims_at + 4 + 8 * j} is {dim % 2**64:,}, negative as an int64",
                    dims_at + 4 + 8 * j,
                )
        n_elements = 1
        for dim in shape:
            n_elements *= dim
        if n_elements > INT64_MAX:
            raise GGUFError(
                f"{label} at byte {dims_at} has shape {shape}: {n_elements:,} elements overflow int64", dims_at
            )

        type_at = self.pos
        ggml_type = self.u32(f"ggml type of {label}")
        info = GGML_TYPES.get(ggml_type)
        if info is None:
            if ggml_type in _REMOVED_GGML_TYPES:
                why = f"{_REMOVED_GGML_TYPES[ggml_type]}, a type ggml has removed"
            else:
                why = f"unknown; known ids are 0-{max(GGML_TYPES)} (enum ggml_type in ggml.h)"
            raise GGUFError(f"{label}: ggml type {ggml_type} at byte {type_at} is {why}", type_at)
        n_per_row = shape[0] if shape else 1
        if n_per_row % info.block_size:  # gguf.cpp: "not a multiple of block size"
            raise GGUFError(
                f"{label} of type {info.name}: a row of {n_per_row:,} weights (dimension 0) is not a "
                f"whole number of {info.block_size}-weight blocks",
                dims_at,
            )
        n_bytes = n_elements // n_per_row * info.row_bytes(n_per_row) if n_per_row else 0
        if n_bytes > INT64_MAX:
            raise GGUFError(f"{label} at byte {dims_at}: {n_bytes:,} bytes overflow int64", dims_at)

        offset_at = self.pos
        offset = self.u64(f"data offset of {label}")
        if offset % alignment:
            raise GGUFError(
                f"{label}: data offset {offset:,} at byte {offset_at} is not a multiple of the alignment {alignment}",
                offset_at,
            )
        return GGUFTensor(name, tuple(shape), ggml_type, info.name, offset, n_elements, n_bytes)


def _magic_hint(buf: Any) -> str:
    """A hint for files that are commonly mistaken for GGUF."""
    head = bytes(buf[:64])
    if head.startswith(b"version https://git-lfs"):
        return " (this is a Git LFS pointer file, not the model: fetch it with `git lfs pull`)"
    if head[:4] in (b"lmgg", b"fmgg", b"tjgg"):
        return " (this is an old GGML/GGMF/GGJT file, from before GGUF: re-convert the model)"
    if len(head) > 9 and head[8:10] == b'{"':
        return " (this looks like a .safetensors file: convert it with llama.cpp's convert_hf_to_gguf.py)"
    if head.lstrip()[:1] in (b"<", b"{"):
        return " (this looks like an HTML or JSON file, not a model)"
    return ""


def read_gguf(
    source: Any,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    *,
    file_size: int | None = None,
    max_array_items: int = DEFAULT_MAX_ARRAY_ITEMS,
    utf8_errors: str = "strict",
) -> GGUFHeader:
    """Parse a GGUF header. Reads only the header, never the tensor data.

    source: bytes / bytearray / memoryview holding the start of the file (a slice is fine: if the header
        goes on past it, GGUFTruncated says how many bytes are needed), or a binary file object (read from
        its current position, in growing chunks), or a path.
    max_header_bytes: refuse headers longer than this (GGUFLimitError).
    file_size: the whole file's size, if known (a browser's File.size): lets us tell a short slice from a
        truncated file, and check that the tensor data fits. Found by itself for seekable file objects.
    max_array_items: the most metadata array elements in the whole header (memory bound).
    utf8_errors: "strict" (invalid UTF-8 raises GGUFError) or a codec error handler such as "replace".

    Raises ValueError (GGUFError, GGUFTruncated, GGUFLimitError) for anything that is not a valid header.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return read_gguf(
                f, max_header_bytes, file_size=file_size, max_array_items=max_array_items, utf8_errors=utf8_errors
            )
    if max_header_bytes < 24:
        raise ValueError("max_header_bytes must be at least 24, the size of the fixed header")
    parser = _Parser(_Source(source, max_header_bytes, file_size), max_array_items, utf8_errors)
    return parser.header()
