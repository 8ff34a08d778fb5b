"""The terminal face: `python -m enginelab MODEL [options]` runs the library on a model and a machine.

    python -m enginelab qwen3-8b --machine rtx3060 --ctx 32k
    python -m enginelab ~/models/Qwen3-30B-A3B-Q4_K_M.gguf --machine rtx3090,rtx3060 --json
    python -m enginelab unsloth/Qwen3-8B-GGUF:Q8_0 --machine 24gb-936gbs-71tf

MODEL is a catalog key (perf_model.MODELS), a .gguf file (its header only, perf_model.model_from_gguf; a split
model's parts, name-00001-of-0000N.gguf, read together), a folder (each GGUF model in it a row; a folder holding
only a config.json, such as a Hugging Face snapshot, reads that), a config.json (perf_model.model_from_hf_config),
or a Hugging Face repo `owner/repo` (or a huggingface.co or https:// link): its GGUF list and one file's header by
HTTP Range requests (enginelab.remote's reader, with urllib here), `owner/repo:TAG` picking the file as
llama.cpp's -hf does; a repo without GGUF files is read from its config.json. Nothing else touches the network.

It prints where llama.cpp would put the model (memory per device, the -ngl --fit picks), decode and prefill
speed (the measured profile's range of published runs with them), decode against context, and the
llama-server command; --json prints the same numbers as one JSON object. The numbers come from the functions
the calculator's Scenario calls (perf_model.place, decode_step_time, prefill_time, llama_server_command), with
the calculator's 2,000-token conversation, plus what the calculator has no control for: -np, --swa-full and --build.

Bad input prints one line naming the argument and exits with 2; a model that does not fit is an answer (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import difflib
import json
import math
import os
import re
import shlex
import sys
import textwrap

import perf_model as pm

from . import custom, explain, fmt, gpus, remote, scenario
from .checks import brief
from .ggml import ALL_QUANTS

PROG = "python -m enginelab"
DEFAULT_MACHINE = "rtx4060ti"  # the calculator's default; its host (RAM, CPU, PCIe) carries GPUs given by name
DEFAULT_CTX = 8192  # the calculator's default n_ctx (less where the model was trained on less)
TOKENS = 2000  # the calculator's default conversation: decode is read there, and it is the prompt prefill times
MAX_FOLDER_FILES = 5000  # directory entries looked at in a folder (a model folder holds a few dozen)
MAX_FOLDER_DEPTH = 3  # subfolders (unsloth puts split quants in one per quantization)
# perf_model's argument names -> this command's
ARG_NAMES = {
    "n_ctx": "--ctx",
    "n_gpu_layers": "--ngl",
    "n_seq": "--np",
    "swa_full": "--swa-full",
    "kv_type": "--kv",
    "quant": "--quant",
    "build": "--build",
    "n_cpu_moe": "--n-cpu-moe",
    "profile": "--profile",
    "machine": "--machine",
    "model": "MODEL",
}


class UsageError(ValueError):
    """Bad input: one line for the terminal, exit code 2. arg: the argument it names, when known."""

    def __init__(self, message: str, arg: str = ""):
        super().__init__(message)
        self.arg = arg or message.partition(":")[0]


def _run(coro):
    """Run a coroutine to its end: here, or in a thread of its own when this thread already runs an event loop
    (main() called from a notebook, whose kernel has one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _clean(text: str) -> str:
    """Terminal-safe text: control characters (a hostile GGUF's name could carry escape sequences) become '?'."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "?", str(text))


def _setting_error(e: ValueError) -> UsageError:
    """A perf_model ValueError ("n_ctx: ...") as this command's argument ("--ctx: ...")."""
    msg = str(e)
    field, sep, rest = msg.partition(":")
    if sep and field.strip() in ARG_NAMES:
        return UsageError(f"{ARG_NAMES[field.strip()]}:{rest}")
    return UsageError(msg, arg="MODEL")


# ---------------------------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------------------------
class _Formatter(argparse.HelpFormatter):
    def _fill_text(self, text, width, indent):  # model keys such as gpt-oss-20b stay whole on a line
        return textwrap.fill(
            " ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage + error lines, as one line and exit code 2
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        formatter_class=_Formatter,
        description="Where llama.cpp would put a model on a machine, how fast it would run, and the "
        "llama-server command (enginelab's calculator in a terminal).",
        epilog=f"Catalog models: {', '.join(pm.MODELS)}. Machines: {', '.join(pm.MACHINES)}; or GPUs by name "
        f"({', '.join(pm.GPUS)}) or as {gpus.CARD_EXAMPLE} (memory GB, bandwidth GB/s, FP16 TFLOP/s), "
        f"comma-separated, on the {DEFAULT_MACHINE} machine's RAM and CPU.",
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        help="a catalog key, a .gguf file, a folder of GGUF files, a config.json, or a Hugging Face repo "
        "owner/repo[:TAG] (read over the network)",
    )
    p.add_argument("--machine", default=DEFAULT_MACHINE, help=f"a catalog machine or GPUs (default {DEFAULT_MACHINE})")
    p.add_argument("--quant", help="the quantization preset (default Q4_K_M; a GGUF file has its own)")
    p.add_argument(
        "--ctx", default=None, help=f"n_ctx, -c: tokens or 32k; 0 = the trained context (default {DEFAULT_CTX})"
    )
    p.add_argument("--kv", default="f16", help=f"KV cache type, -ctk/-ctv: {', '.join(pm.KV_TYPES)} (default f16)")
    p.add_argument("--ngl", default="auto", help="-ngl: layers on the GPU, or auto (what --fit picks; the default)")
    p.add_argument("--n-cpu-moe", default="0", help="--n-cpu-moe: keep the experts of the first N layers in RAM")
    p.add_argument("--np", default="1", help="-np: parallel sequences, each with n_ctx/np of context (default 1)")
    p.add_argument(
        "--swa-full", action="store_true", help="--swa-full: sliding-window layers keep the whole context (default off)"
    )
    p.add_argument("--profile", default="measured", help="measured (fitted on llama-bench runs; default) or course")
    p.add_argument("--build", default=None, help="the llama.cpp build the measured profile estimates (default today)")
    p.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    return p


@dataclasses.dataclass(frozen=True)
class Options:
    machine: pm.Machine
    quant: str | None  # None: not given
    ctx: int | None  # None: the default; 0: the trained context
    kv: str
    ngl: int | None  # None: auto
    n_cpu_moe: int
    np: int
    swa_full: bool
    profile: str
    build: str | None
    json: bool


def _int_arg(text: str, arg: str, lo: int, hi: int, k_suffix: bool = False) -> int:
    t = str(text).strip().lower().replace("_", "").replace(",", "")
    mult = 1
    if k_suffix and t.endswith("k"):
        t, mult = t[:-1], 1024
    if not re.fullmatch(r"[0-9]{1,9}", t):
        raise UsageError(f"{arg}: {brief(text)} is not a whole number" + (" (or like 32k)" if k_suffix else ""))
    v = int(t) * mult
    if not lo <= v <= hi:
        raise UsageError(f"{arg}: {v:,} is outside {lo:,} to {hi:,}")
    return v


def machine_arg(text: str) -> pm.Machine:
    """A catalog machine, or GPUs (catalog cards or 24gb-936gbs-71tf, comma-separated) on the default machine's
    host, or UsageError."""
    t = str(text).strip()
    low = t.lower()
    if low in pm.MACHINES and low != "custom":
        return pm.MACHINES[low]
    if not t:
        raise UsageError(f"--machine: empty; name one of {', '.join(pm.MACHINES)} or GPUs like {gpus.CARD_EXAMPLE}")
    tokens, devices, problems = gpus.parse_gpus(t)
    if problems or not devices:
        why = "; ".join(problems) if problems else "no GPU named"
        raise UsageError(f"--machine: {why}. Machines: {', '.join(pm.MACHINES)}")
    return gpus.machine_with_gpus(pm.MACHINES[DEFAULT_MACHINE], {"gpus": ",".join(tokens)})


def quant_arg(text: str) -> str:
    by_upper = {q.upper(): q for q in ALL_QUANTS}
    q = by_upper.get(str(text).strip().upper())
    if q is None:
        raise UsageError(f"--quant: unknown quantization {brief(text)}; allowed: {', '.join(ALL_QUANTS)}")
    return q


def options(ns) -> Options:
    kv = str(ns.kv).strip().lower()
    if kv not in pm.KV_TYPES:
        raise UsageError(f"--kv: {brief(ns.kv)} is not a KV cache type; allowed: {', '.join(pm.KV_TYPES)}")
    profile = str(ns.profile).strip().lower()
    if profile not in ("measured", "course"):
        raise UsageError(f"--profile: {brief(ns.profile)}; allowed: measured, course")
    ngl = None
    if str(ns.ngl).strip().lower() != "auto":
        ngl = _int_arg(ns.ngl, "--ngl", 0, pm.MAX_NGL)
    return Options(
        machine=machine_arg(ns.machine),
        quant=None if ns.quant is None else quant_arg(ns.quant),
        ctx=None if ns.ctx is None else _int_arg(ns.ctx, "--ctx", 0, pm.MAX_CONTEXT, k_suffix=True),
        kv=kv,
        ngl=ngl,
        n_cpu_moe=_int_arg(ns.n_cpu_moe, "--n-cpu-moe", 0, pm.MAX_LAYERS),
        np=_int_arg(ns.np, "--np", 1, pm.MAX_SEQ),
        swa_full=bool(ns.swa_full),
        profile=profile,
        build=ns.build,
        json=ns.json,
    )


# ---------------------------------------------------------------------------------------------------------------
# Models: what MODEL names
# ---------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Source:
    """One model to place: a row of the answer."""

    label: str  # the catalog key, file or repo, as the reader would recognise it
    kind: str  # catalog, gguf, config, hf-gguf, hf-config
    model: pm.Model | None
    quant: str | None  # None: the GGUF file's own tensor types
    path: str = ""  # a local file llama-server would load (-m)
    file_bytes: int | None = None  # a GGUF file's size (all parts)
    remote: object = None  # remote.RemoteModel
    notes: list = dataclasses.field(default_factory=list)
    error: str = ""  # a folder's file that could not be read


def _read_header(path: str):
    from . import gguf_header as gh

    try:
        return gh.read_gguf(path, max_header_bytes=custom.GGUF_MAX_HEADER)
    except OSError as e:
        raise UsageError(f"MODEL: cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise UsageError(f"MODEL: {os.path.basename(path)} is not a GGUF model file we can read: {e}") from None


def gguf_model(paths: list) -> pm.Model:
    """A model from a GGUF file, or from a split model's parts in order: as enginelab.remote reads them, the first
    part's header holds the metadata and every part its own tensors."""
    first = _read_header(paths[0])
    name = os.path.basename(paths[0])
    count = first.metadata.get("split.count", 1)
    if not isinstance(count, int) or isinstance(count, bool):
        count = 1
    if count > 1 and count != len(paths):
        raise UsageError(f"MODEL: {name} says it is part 1 of {count}, but its name says {len(paths)}")
    tensors = list(first.tensors)
    for p in paths[1:]:
        tensors += _read_header(p).tensors
    want = first.metadata.get("split.tensors.count")
    if count > 1 and isinstance(want, int) and want != len(tensors):
        raise UsageError(f"MODEL: {name}: the parts list {len(tensors):,} tensors, the first says {want:,}")
    try:
        return pm.model_from_gguf(dataclasses.replace(first, tensors=tensors))
    except ValueError as e:
        raise UsageError(f"MODEL: {name}: {e}") from None


def _gguf_source(label: str, paths: list) -> Source:
    model = gguf_model(paths)
    size = sum(os.path.getsize(p) for p in paths)
    notes = [types_note(model)]
    if len(paths) > 1:
        notes.append(f"a split model: {len(paths)} parts read together")
    return Source(label, "gguf", model, None, path=paths[0], file_bytes=size, notes=notes)


def _split_paths(path: str) -> list:
    """A split model's part paths from any part's (x-00002-of-00003.gguf), or [path]; UsageError if one is missing."""
    folder, name = os.path.split(path)
    names = remote.split_parts(name)
    paths = [os.path.join(folder, n) for n in names]
    missing = [n for n, p in zip(names, paths) if not os.path.isfile(p)]
    if missing:
        raise UsageError(f"MODEL: {name} is one of {len(names)} parts; missing beside it: {', '.join(missing[:3])}")
    return paths


def _hf_snapshot_name(path: str) -> str:
    """owner/repo for a file in the Hugging Face cache (models--owner--repo/snapshots/<hash>/...), else ''."""
    m = re.search(r"models--([^/\\]+?)--([^/\\]+)[/\\]snapshots[/\\]", os.path.abspath(path))
    return f"{m[1]}/{m[2]}" if m else ""


def config_source(path: str, quant: str | None) -> Source:
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            text = f.read(custom.CONFIG_MAX_CHARS + 1)
    except OSError as e:
        raise UsageError(f"MODEL: cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UsageError(f"MODEL: {path} is not a UTF-8 text file (a config.json is)") from None
    try:
        cfg = custom.parse_config(text)
        name = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) else ""
        folder = os.path.basename(os.path.dirname(os.path.abspath(path)))  # ~/models/Qwen3-8B/config.json
        folder = folder if os.path.basename(path) == "config.json" else ""
        model = pm.model_from_hf_config(cfg, name=name or _hf_snapshot_name(path) or folder or path)
    except ValueError as e:
        raise UsageError(f"MODEL: {path}: {e}") from None
    return Source(path, "config", model, quant or "Q4_K_M")


def _folder_listing(folder: str) -> list:
    """The folder's files as the Hub lists a repo's ({type, path, size}, paths relative and with '/'), a few
    subfolders deep."""
    out = []
    for root, dirs, files in os.walk(folder):
        depth = os.path.relpath(root, folder).count(os.sep) + (root != folder)
        dirs[:] = sorted(dirs) if depth < MAX_FOLDER_DEPTH else []
        for f in sorted(files):
            full = os.path.join(root, f)
            try:
                size = os.path.getsize(full)
            except OSError:
                continue
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            out.append({"type": "file", "path": rel, "size": size})
            if len(out) >= MAX_FOLDER_FILES:
                return out
    return out


def folder_sources(folder: str, quant: str | None) -> tuple:
    """(a Source per GGUF model in the folder, the .gguf files left out and why). Split parts are one model
    (enginelab.remote.gguf_files groups them as it does a repo's list); vision projectors (mmproj) are left out."""
    listing = _folder_listing(folder)
    models = remote.gguf_files(listing)
    used = {p for f in models for p, _s in f.parts}
    skipped = []
    for e in listing:
        if e["path"].lower().endswith(".gguf") and e["path"] not in used:
            why = "a vision projector" if "mmproj" in e["path"].lower() else "an incomplete split or an odd name"
            skipped.append(f"{e['path']} ({why})")
    if not models:
        cfg = os.path.join(folder, "config.json")
        if os.path.isfile(cfg):
            return [config_source(cfg, quant)], skipped
        raise UsageError(f"MODEL: no GGUF model (and no config.json) in the folder {folder}")
    if quant is not None:
        raise UsageError("--quant: the GGUF files use their own tensor types; leave --quant out")
    out = []
    for f in models:
        paths = [os.path.join(folder, *p.split("/")) for p, _s in f.parts]
        try:
            out.append(_gguf_source(f.name, paths))
        except UsageError as e:
            out.append(Source(f.name, "gguf", None, None, path=paths[0], error=str(e).removeprefix("MODEL: ")))
    return out, skipped


def local_source(path: str, quant: str | None) -> Source:
    name = os.path.basename(path).lower()
    with open(path, "rb") as f:
        magic = f.read(4)
    if name.endswith(".gguf") or magic == b"GGUF":
        if quant is not None:
            raise UsageError("--quant: a GGUF file uses its own tensor types; leave --quant out")
        return _gguf_source(os.path.basename(path), _split_paths(path))
    if name.endswith(".json") or magic[:1] == b"{":
        return config_source(path, quant)
    raise UsageError(f"MODEL: {path} is neither a .gguf file nor a config.json")


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face (or an https:// link), over urllib
# ---------------------------------------------------------------------------------------------------------------
def looks_remote(text: str) -> bool:
    t = text.strip()
    return (
        "://" in t
        or t.lower().startswith(("huggingface.co/", "hf.co/"))
        or bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(:[A-Za-z0-9._-]+)?", t))
    )


def _content_total(headers, status: int) -> int | None:
    cr = headers.get("Content-Range") or ""
    m = re.match(r"^\s*bytes\s+\d+-\d+/(\d+)\s*$", cr)
    if m:
        return int(m[1])
    cl = headers.get("Content-Length")
    if status == 200 and cl and cl.strip().isdigit():
        return int(cl)
    return None


async def urllib_fetch(url: str, start, end, limit) -> remote.Response:
    """enginelab.remote's fetch over urllib: at most `limit` body bytes (a 200 answer to a range request, a server
    ignoring the range, up to byte `end`); a request with no answer raises RemoteError."""
    import urllib.error
    import urllib.request

    headers = {"User-Agent": "enginelab (python -m enginelab; header reads only)"}
    if start is not None:
        headers["Range"] = f"bytes={start}-{end}"
    req = urllib.request.Request(url, headers=headers)
    host = remote.host_of(url)
    try:
        with urllib.request.urlopen(req, timeout=remote.TIMEOUT_S) as r:
            status = r.status
            keep = limit if limit is not None else remote.MAX_HEADER_BYTES
            if status == 200 and start is not None:
                keep = end + 1
            body = bytearray()
            while len(body) < keep:
                chunk = r.read(min(keep - len(body), 1 << 20))
                if not chunk:
                    break
                body += chunk
            return remote.Response(status, bytes(body), _content_total(r.headers, status))
    except urllib.error.HTTPError as e:
        return remote.Response(e.code, b"", None)
    except TimeoutError:
        raise remote.RemoteError("timeout", f"{host} did not answer within {remote.TIMEOUT_S} s") from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        raise remote.RemoteError(
            "network", f"could not reach {host} ({why}); reading a Hugging Face repo needs a network"
        ) from None


def _cached(fetch):
    """fetch, answering a repeated whole-body request (the repo's file list) from memory."""
    seen: dict = {}

    async def go(url, start, end, limit):
        if start is not None:
            return await fetch(url, start, end, limit)
        key = (url, limit)
        if key not in seen:
            seen[key] = await fetch(url, start, end, limit)
        return seen[key]

    return go


def _pick(files: list, tag: str):
    """The repo's file whose name carries the tag (Q8_0, UD-Q4_K_XL, ...), as llama.cpp's -hf owner/repo:TAG."""
    t = tag.lower()
    hits = [f for f in files if re.search(rf"(^|[-_./]){re.escape(t)}([-_.]|$)", f.name.lower())]
    if not hits:
        names = ", ".join(f.name for f in files[:12]) + (" ..." if len(files) > 12 else "")
        raise UsageError(f"MODEL: no GGUF file in the repo is tagged {brief(tag)}; its files: {names}")
    return min(hits, key=lambda f: len(f.name))


async def _listing(fetch, repo: str) -> list:
    """The repo's GGUF files (enginelab.remote.gguf_files) from the Hub's file list."""
    url = remote.tree_url(repo)
    r = await fetch(url, None, None, remote.MAX_LISTING_BYTES + 1)
    if r.status in (401, 403, 404):
        raise UsageError(
            f"MODEL: huggingface.co has no public repo {repo} (HTTP {r.status}: misspelt, gated or private)"
        )
    if r.status >= 400:
        raise UsageError(f"MODEL: huggingface.co answered HTTP {r.status} for the file list of {repo}")
    if len(r.body) > remote.MAX_LISTING_BYTES:
        raise UsageError(f"MODEL: the file list of {repo} is over {fmt.mib(remote.MAX_LISTING_BYTES)}")
    try:
        text = r.body.decode("utf-8")
        custom.check_json_text(text, f"the file list of {repo}")
        return remote.gguf_files(json.loads(text, parse_constant=lambda c: None))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise UsageError(f"MODEL: the file list of {repo} is not valid JSON") from None
    except ValueError as e:
        raise UsageError(f"MODEL: {e}") from None


async def _read_remote(text: str, quant: str | None, fetch) -> Source:
    t = text.strip()
    tag = ""
    if "://" not in t and ":" in t:  # owner/repo:TAG, as llama.cpp's -hf
        t, _, tag = t.partition(":")
    target = remote.parse_input(t)
    fetch = _cached(fetch)
    files, quant_picked = [], False
    if target.hf and not target.file:
        files = await _listing(fetch, target.hf)
        if files:
            quant_picked = bool(quant and not tag)
            chosen = _pick(files, tag or quant) if tag or quant else remote.default_file(files)
            target = remote.Target(hf=target.hf, file=chosen.name)
        elif tag:
            raise UsageError(f"MODEL: {target.hf} has no GGUF files to pick {brief(tag)} from")
    show = _progress_line()
    try:  # the file's header by Range requests, or the repo's config.json
        rm = await remote.read(target, fetch, show)
    finally:
        if show is not None:
            show(None)
    if rm.kind == "gguf" and quant is not None and not quant_picked:
        raise UsageError("--quant: a GGUF file uses its own tensor types; leave --quant out")
    src = Source(
        rm.target.describe(),
        ("hf-" if rm.target.hf else "url-") + rm.kind,
        rm.model,
        None if rm.kind == "gguf" else quant or "Q4_K_M",
        file_bytes=rm.progress.file_size if rm.kind == "gguf" else None,
        remote=rm,
    )
    src.notes.append(_clean(rm.summary()))
    if rm.kind == "gguf":
        src.notes.append(types_note(rm.model))
    others = [f.label for f in files if f.name != rm.target.file]
    if others:
        src.notes.append("other files in the repo (owner/repo:TAG picks one): " + _clean(", ".join(others)))
    return src


def _progress_line():
    """On a terminal, remote.read's progress on one stderr line (cleared at the end); elsewhere nothing."""
    if not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None

    def show(p) -> None:
        sys.stderr.write("\r\x1b[K" + ("" if p is None else _clean(p.text())[:110]))
        sys.stderr.flush()

    return show


def remote_source(text: str, quant: str | None, fetch=None) -> Source:
    try:
        return _run(_read_remote(text, quant, fetch or urllib_fetch))
    except remote.RemoteError as e:  # the page's words, said of this command
        raise UsageError(f"MODEL: {e}".replace("This page never", "enginelab never")) from None


def sources(text: str, quant: str | None, fetch=None) -> tuple:
    """(the Sources MODEL names, the folder's .gguf files left out). UsageError when it names none."""
    t = str(text).strip()
    if not t:
        raise UsageError("MODEL: empty; name a catalog model, a GGUF file or folder, a config.json or owner/repo")
    key = t.lower()
    if key in pm.MODELS and key not in custom.RESERVED_KEYS:
        return [Source(key, "catalog", pm.MODELS[key], quant or "Q4_K_M")], []
    path = os.path.expanduser(t)
    if os.path.isdir(path):
        return folder_sources(path, quant)
    if os.path.isfile(path):
        try:
            return [local_source(path, quant)], []
        except OSError as e:
            raise UsageError(f"MODEL: cannot read {t}: {e.strerror or e}") from None
    if looks_remote(t):
        return [remote_source(t, quant, fetch)], []
    near = difflib.get_close_matches(key, list(pm.MODELS), n=3)
    hint = f"; did you mean {' or '.join(near)}?" if near else f"; catalog: {', '.join(pm.MODELS)}"
    raise UsageError(f"MODEL: {brief(t)} is not a catalog model, a file or folder, or a Hugging Face owner/repo{hint}")


# ---------------------------------------------------------------------------------------------------------------
# The numbers
# ---------------------------------------------------------------------------------------------------------------
def range_contexts(n: int) -> list:
    """Decode is tabulated at 0, then 1k, 2k, 4k, ... up to the context a sequence has, and at that context."""
    out = [0]
    c = 1024
    while c < n:
        out.append(c)
        c *= 2
    return out + [n] if n > 0 else out


def _rng(d: dict) -> tuple:
    r = d.get("range_tok_s")
    return (r[0], r[1]) if r else (None, None)


def _speed_row(d: dict, **extra) -> dict:
    low, high = _rng(d)
    return {**extra, "tok_s": d["tok_per_s"], "low_tok_s": low, "high_tok_s": high}


def _device_rows(p: pm.Placement) -> list:
    rows = []
    for u in p.per_gpu:
        rows.append(
            {
                "device": f"GPU {u.index}",
                "name": u.name,
                "layers": sum(1 for x in u.layers if x < p.n_layers),
                "output_layer": p.n_layers in u.layers,
                "weights_bytes": u.weights,
                "kv_bytes": u.kv,
                "compute_bytes": u.compute,
                "total_bytes": u.total,
                "capacity_bytes": u.capacity,
                "margin_bytes": u.margin if u.total > 0 else 0.0,
                "free_bytes": u.free,
            }
        )
    cpu_layers = p.n_layers - p.gpu_layers
    rows.append(
        {
            "device": "RAM",
            "name": p.machine.ram.name,
            "layers": cpu_layers,
            "output_layer": not p.output_on_gpu,
            "weights_bytes": p.cpu_weights,
            "kv_bytes": p.cpu_kv,
            "compute_bytes": p.cpu_compute,
            "total_bytes": p.cpu_total,
            "capacity_bytes": p.cpu_capacity,
            "margin_bytes": 0.0,
            "free_bytes": p.cpu_capacity - p.cpu_total,
        }
    )
    return rows


def _grouped(unknown) -> list:
    """The reader's per-block gaps ("block 3: ..."), one line per gap with the blocks it applies to."""
    blocks: dict = {}
    for u in unknown:
        m = re.match(r"^block (\d+): (.*)$", str(u))
        what, il = (m[2], int(m[1])) if m else (str(u), None)
        blocks.setdefault(what, []).append(il)
    out = []
    for what, ils in blocks.items():
        ils = [i for i in ils if i is not None]
        if not ils:
            out.append(what)
        elif len(ils) == 1:
            out.append(f"block {ils[0]}: {what}")
        else:
            out.append(f"{len(ils)} blocks ({ils[0]} to {ils[-1]}): {what}")
    return out


def types_note(m: pm.Model) -> str:
    """A GGUF model's tensor types by bytes, largest first."""
    by_type: dict = {}
    for r in pm.quantize_plan(m, None):
        by_type[r["type"]] = by_type.get(r["type"], 0) + r["bytes"]
    mix = sorted(by_type.items(), key=lambda kv: -kv[1])
    return "tensor types: " + ", ".join(f"{t} {fmt.gb(b, 2)}" for t, b in mix[:6]) + (" ..." if len(mix) > 6 else "")


def n_ctx_for(model: pm.Model, opts: Options) -> tuple:
    """(n_ctx, a note or ''): --ctx, 0 for the trained context as -c 0, or the calculator's default capped at the
    trained context."""
    trained = model.max_position_embeddings
    if opts.ctx is None:
        return min(DEFAULT_CTX, trained), ""
    if opts.ctx == 0:
        return trained, ""
    if opts.ctx > trained:
        return opts.ctx, f"n_ctx {opts.ctx:,} is above the {trained:,} tokens the model was trained on"
    return opts.ctx, ""


def compute(src: Source, opts: Options) -> dict:
    """One row's numbers (JSON-ready). A setting perf_model rejects raises UsageError naming the argument."""
    m, machine = src.model, opts.machine
    n_ctx, ctx_note = n_ctx_for(m, opts)
    notes = list(src.notes) + ([ctx_note] if ctx_note else [])
    n_cpu_moe = min(opts.n_cpu_moe, m.num_hidden_layers) if m.is_moe else 0  # more than its layers: all of them
    if opts.n_cpu_moe and not m.is_moe:
        notes.append("--n-cpu-moe does nothing here: the model has no experts")
    bm = m.carried_blocks
    if bm is not None:  # what the reader could not verify or infer (as the explain box says)
        notes += [_clean(f"not in the file: {u}") for u in _grouped(bm.unknown)]
    warnings = [_clean(w) for w in bm.warnings] if bm is not None else []  # "architecture not verified: ..."
    try:
        p = pm.place(
            m,
            machine,
            src.quant,
            n_ctx=n_ctx,
            kv_type=opts.kv,
            n_gpu_layers=opts.ngl,
            n_cpu_moe=n_cpu_moe,
            n_seq=opts.np,
            swa_full=opts.swa_full,
            profile=opts.profile,
        )
    except ValueError as e:
        raise _setting_error(e) from None
    n_seq_ctx = max(1, n_ctx // opts.np)  # each of -np sequences gets n_ctx / np cells (one stream each)
    command = pm.llama_server_command(p, n_parallel=opts.np if opts.np > 1 else None)
    if src.path:  # the file itself, not the name a download of this preset would have
        parts = command.split(" ")
        if "-m" in parts:
            i = parts.index("-m")
            command = " ".join(parts[: i + 1] + [shlex.quote(src.path)] + parts[i + 2 :])
    if src.remote is not None:
        command = remote.command_for(src.remote, command)
    weights = pm.weight_bytes(m, src.quant)["total"]
    row = {
        "source": {"kind": src.kind, "name": _clean(src.label)},
        "model": {
            "name": _clean(m.name),
            "model_type": _clean(m.model_type),
            "layers": m.num_hidden_layers,
            "params": m.total_params(),
            "active_params": m.active_params(),
            "quant": src.quant,
            "weights_bytes": weights,
            "file_bytes": src.file_bytes if src.file_bytes is not None else pm.file_bytes(m, src.quant),
            "max_position_embeddings": m.max_position_embeddings,
            "kv_bytes_per_token": pm.kv_bytes_per_token(m, opts.kv),
            "warnings": warnings,
        },
        "settings": {"n_ctx": n_ctx, "n_ctx_seq": n_seq_ctx, "kv_type": opts.kv, "n_parallel": opts.np},
        "fit": {
            "fits": p.fits,
            "verdict": scenario.verdict(p),
            "n_gpu_layers": p.n_gpu_layers,
            "of_layers": m.n_layers + 1,
            "auto": p.auto,
            "vram_bytes": p.gpu_total,
            "ram_bytes": p.cpu_total,
            "kv_bytes": p.gpu_kv + p.cpu_kv,
            "devices": _device_rows(p),
            "error": None if p.fits else _clean(p.error or "does not fit"),
            "overflow_bytes": p.overflow_bytes,
            "failing_device": p.failing_device or None,
        },
        "speed": None,
        "range": [],
        "command": _clean(command),
        "notes": notes,
    }
    if not p.fits:
        return row
    short = min(TOKENS, n_seq_ctx)
    try:
        dec = {c: pm.decode_step_time(p, context=c, build=opts.build) for c in range_contexts(n_seq_ctx) + [short]}
        f = pm.prefill_time(p, n_tokens=short, build=opts.build)
        par = pm.decode_step_time(p, context=short, batch=opts.np, build=opts.build) if opts.np > 1 else None
    except ValueError as e:
        if str(e).startswith("build"):
            raise _setting_error(e) from None
        row["notes"].append(_clean(f"perf_model could not time this placement ({e})"))
        return row
    except ArithmeticError as e:
        row["notes"].append(_clean(f"perf_model could not time this placement ({type(e).__name__}: {e})"))
        return row
    row["speed"] = {
        "profile": opts.profile,
        "build": opts.build or "today",
        "backend": dec[short].get("backend"),
        "basis": explain.basis_text(dec[short]["backend"], "decode") if opts.profile == "measured" else None,
        "cpu_share": dec[short]["cpu_s"] / dec[short]["total_s"],
        "decode": [_speed_row(dec[c], context=c) for c in sorted({0, short, n_seq_ctx})],
        "prefill": _speed_row(f, n_tokens=short),
        "parallel_decode": None if par is None else _speed_row(par, context=short, sequences=opts.np),
    }
    row["range"] = [
        _speed_row(dec[c], context=c, kv_read_bytes=dec[c]["gpu_kv_bytes"] + dec[c]["cpu_kv_bytes"])
        for c in range_contexts(n_seq_ctx)
    ]
    return row


def machine_json(mc: pm.Machine) -> dict:
    def dev(d):
        return {"name": d.name, "memory_gb": d.mem_gb, "bandwidth_gbs": d.bandwidth_gbs, "fp16_tflops": d.fp16_tflops}

    return {
        "name": _clean(mc.name),
        "gpus": [dev(d) for d in mc.gpus],
        "ram": dev(mc.ram),
        "unified": mc.unified,
        "pcie_gbs": mc.pcie_gbs,
    }


# ---------------------------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------------------------
FOLDER_FIT = {"vram": "in VRAM", "partial": "partial", "fails": "fails"}
VERDICTS = {"vram": "fits in VRAM", "partial": "runs with part of it in system RAM", "fails": "fails to allocate"}


def _g(n: float) -> str:
    return fmt.gb_num(n, 2)


def _range_text(r: dict) -> str:
    if r["low_tok_s"] is None:
        return ""
    return f"most runs {fmt.rate(r['low_tok_s'])}-{fmt.rate(r['high_tok_s'])}"


def _table(header: list, rows: list, right=()) -> list:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells):
        out = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  " + "  ".join(out).rstrip()

    return [line(header)] + [line(r) for r in rows]


def row_text(row: dict, machine: dict) -> list:
    m, fit, s = row["model"], row["fit"], row["settings"]
    quant = m["quant"] or "its own tensor types"
    out = [
        f"{m['name']} ({quant}) on {machine['name']}",
        f"  {row['source']['kind']} {row['source']['name']}: {m['layers']} layers, {m['params'] / 1e9:.2f}B parameters, "
        f"{fmt.gb(m['weights_bytes'], 2)} of weights, file {fmt.gb(m['file_bytes'], 2)}; "
        f"KV {fmt.bytes_auto(m['kv_bytes_per_token'])} per token ({s['kv_type']})",
        f"  n_ctx {s['n_ctx']:,}"
        + (f", -np {s['n_parallel']} ({s['n_ctx_seq']:,} each)" if s["n_parallel"] > 1 else ""),
    ]
    for w in m["warnings"]:  # as the calculator's box above its verdict
        out.append(
            f"  Warning: {w[:1].upper()}{w[1:]}. model_type {m['model_type']!r} was read from the config's standard "
            "keys, so the numbers below are those of a plain stack of such blocks."
        )
    out += [
        "",
        f"Fit: {VERDICTS[fit['verdict']] if machine['gpus'] or not fit['fits'] else 'runs on the CPU (no GPU)'}, "
        f"-ngl {fit['n_gpu_layers']} of {fit['of_layers']}" + (" (auto: what --fit picks)" if fit["auto"] else ""),
    ]
    rows = []
    for d in fit["devices"]:
        rows.append(
            [
                d["device"],
                d["name"],
                f"{d['layers']}" + (" + output" if d["output_layer"] else ""),
                _g(d["weights_bytes"]),
                _g(d["kv_bytes"]),
                _g(d["compute_bytes"]),
                _g(d["total_bytes"]),
                _g(d["capacity_bytes"]),
                _g(d["free_bytes"]),
            ]
        )
    out += _table(
        ["", "device", "layers", "weights", "KV", "compute", "total GB", "of GB", "free GB"], rows, right=range(3, 9)
    )
    if not fit["fits"]:
        out.append(f"  {fit['error']}")
    sp = row["speed"]
    if sp is not None:
        prof = f"{sp['profile']} profile"
        if sp["profile"] == "measured":
            prof += f" ({sp['basis']}), llama.cpp build {sp['build']}"
        out += ["", f"Speed, {prof}; the CPU's share of a decode step {fmt.pct(sp['cpu_share'])}:"]
        for d in sp["decode"]:
            out.append(
                f"  decode   {fmt.rate(d['tok_s']):>8} tok/s at {d['context']:,} tokens  {_range_text(d)}".rstrip()
            )
        pf = sp["prefill"]
        out.append(
            f"  prefill  {fmt.rate(pf['tok_s']):>8} tok/s for a {pf['n_tokens']:,}-token prompt  {_range_text(pf)}".rstrip()
        )
        if sp["parallel_decode"]:
            pd = sp["parallel_decode"]
            out.append(
                f"  decode   {fmt.rate(pd['tok_s']):>8} tok/s in all, {pd['sequences']} sequences at "
                f"{pd['context']:,} tokens each"
            )
        out += ["", "Decode against context:"]
        table = [
            [
                f"{r['context']:,}",
                fmt.rate(r["tok_s"]),
                _range_text(r).removeprefix("most runs "),
                _g(r["kv_read_bytes"]),
            ]
            for r in row["range"]
        ]
        out += _table(["context", "tok/s", "most runs", "KV read GB"], table, right=(0, 1, 2, 3))
    out += ["", "llama-server command:", f"  {row['command']}"]
    if row["notes"]:
        out += ["", "Notes:"] + [f"  - {n}" for n in row["notes"]]
    return out


def folder_text(result: dict) -> list:
    rows = []
    for r in result["rows"]:
        if "error" in r and "fit" not in r:
            rows.append([r["source"]["name"], "-", "unreadable", "", "", "", "", ""])
            continue
        fit, sp = r["fit"], r["speed"]
        dec = (
            next((d for d in sp["decode"] if d["context"] == min(TOKENS, r["settings"]["n_ctx_seq"])), None)
            if sp
            else None
        )
        rows.append(
            [
                r["source"]["name"],
                fmt.gb(r["model"]["file_bytes"], 2),
                FOLDER_FIT[fit["verdict"]] if result["machine"]["gpus"] or not fit["fits"] else "CPU",
                f"{fit['n_gpu_layers']}/{fit['of_layers']}",
                _g(fit["vram_bytes"]),
                _g(fit["ram_bytes"]),
                fmt.rate(dec["tok_s"]) if dec else "-",
                fmt.rate(sp["prefill"]["tok_s"]) if sp else "-",
            ]
        )
    out = [f"{len(result['rows'])} models on {result['machine']['name']} ({result['settings']['profile']} profile)"]
    out += _table(
        ["file", "size", "fit", "-ngl", "VRAM GB", "RAM GB", "decode tok/s", "prefill tok/s"],
        rows,
        right=(1, 4, 5, 6, 7),
    )
    out.append(f"  decode at {TOKENS:,} tokens, prefill of a {TOKENS:,}-token prompt; --json for every number")
    for r in result["rows"]:
        if "error" in r and "fit" not in r:
            out.append(f"  {r['source']['name']}: {r['error']}")
    for s in result.get("skipped", []):
        out.append(f"  left out: {s}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------------
def _finite(obj):
    """JSON has no NaN or infinity: such a number becomes null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


OPTION_ARGS = (
    "--machine",
    "--quant",
    "--ctx",
    "--kv",
    "--ngl",
    "--n-cpu-moe",
    "--np",
    "--swa-full",
    "--profile",
    "--build",
)


def run(ns, opts: Options, fetch=None) -> dict:
    """The answer for parsed arguments, as the JSON object --json prints. Raises UsageError for bad input; in a
    folder, a file that cannot be read or placed is a row with its error."""
    found, skipped = sources(ns.model, opts.quant, fetch)
    rows = []
    for src in found:
        try:
            if src.model is None:
                raise UsageError(src.error)
            rows.append(compute(src, opts))
        except UsageError as e:
            if len(found) == 1 or e.arg in OPTION_ARGS:
                raise
            rows.append({"source": {"kind": src.kind, "name": _clean(src.label)}, "error": _clean(e)})
    return _finite(
        {
            "machine": machine_json(opts.machine),
            "settings": {
                "model": _clean(ns.model),
                "quant": opts.quant,
                "n_ctx": opts.ctx,
                "kv_type": opts.kv,
                "n_gpu_layers": "auto" if opts.ngl is None else opts.ngl,
                "n_cpu_moe": opts.n_cpu_moe,
                "n_parallel": opts.np,
                "swa_full": opts.swa_full,
                "profile": opts.profile,
                "build": opts.build or "today",
                "tokens": TOKENS,
            },
            "rows": rows,
            "skipped": skipped,
        }
    )


def main(argv=None, fetch=None) -> int:
    """Run the command line: 0 with the answer printed, 2 for bad input (one line on stderr, no traceback).
    fetch: enginelab.remote's fetch for a Hugging Face read (default: urllib)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        ns = parser().parse_args(argv)
        opts = options(ns)
        result = run(ns, opts, fetch)
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    except UsageError as e:
        print(f"{PROG}: {_clean(e)}", file=sys.stderr)
        return 2
    except ValueError as e:  # a check below this module that no argument above caught
        print(f"{PROG}: {_clean(_setting_error(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if opts.json:
        print(json.dumps(result, indent=1), file=sys.stdout)
    elif len(result["rows"]) == 1 and not result["skipped"]:
        print("\n".join(_clean(x) for x in row_text(result["rows"][0], result["machine"])))
    else:
        print("\n".join(_clean(x) for x in folder_text(result)))
    return 0
