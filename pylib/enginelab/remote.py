"""A model from Hugging Face or a link, read only when the reader asks (issue 16).

    calculator.html?hf=owner/repo                  config.json, and the repo's GGUF files with their sizes
    calculator.html?hf=owner/repo&file=x.gguf      that file's header, read with HTTP Range requests
    calculator.html?url=https://host/x.gguf        the same for a direct link (or a link to a config.json)

The site is offline by default: nothing here runs until the reader presses Read (or opens a link that carries
one of these keys, which is how a shared link re-reads the same header). Only headers are read, never the
weights: the first MAX_FIRST_SLICE bytes, then, if the header goes on, exactly the bytes it says it needs
(gguf_header.GGUFTruncated.needed_bytes), at most MAX_HEADER_BYTES over all the requests for one model. A header
that claims more is refused with a message. A split model (name-00001-of-00003.gguf) is read part by part: the
first part's header holds the metadata, every part its own tensors.

Nothing in this module touches the network. `read(target, fetch, progress)` takes an async `fetch(url, start,
end, limit)` that returns a `Response` or raises `RemoteError` (offline, cors, redirect, network, timeout, stall,
slow, truncated): the browser glue (site/py/main.py) passes one built on the browser's fetch, the tests a fake one
over local files. Every failure is a RemoteError whose message says what happened in plain words; the page shows it
and keeps its last good state.

A host is not trusted to answer as asked. A 200 to a range request (the host ignores ranges) is read from the
file's start up to the bytes asked for, and every byte it sends counts against MAX_HEADER_BYTES. A 206 must say
(when its headers are readable) the range that was asked for: a Content-Range that starts elsewhere, a
Content-Length longer than the range, or a file size that changes between two answers stops the read. The glue
reads no body past the bytes asked for, and stops a host that stalls or drips (STALL_S, MIN_RATE).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

import perf_model as pm

from . import custom, fmt
from .ggml import file_quant

HF = "https://huggingface.co"
MAX_FIRST_SLICE = 1 << 20  # the first Range request: 1 MiB (a header is mostly its vocabulary: 2-12 MB)
MAX_HEADER_BYTES = 64 << 20  # never more than this from one model, all requests and parts together
MAX_LISTING_BYTES = 8 << 20  # the Hub's file list (a few kB; 10,000 files are about 2 MB)
MAX_LISTING_FILES = 20_000
MAX_SPLITS = 256  # gguf-split numbers parts with 5 digits; real models have up to ~30 parts
TIMEOUT_S = 20  # until a request's answer (its status and headers) arrives
STALL_S = 20  # then, the longest wait for the next bytes of its body
MIN_RATE = 4096  # bytes/s: a body that comes slower, averaged over its first RATE_GRACE_S or more, is stopped
RATE_GRACE_S = 10
MAX_INPUT_CHARS = 2048
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_-])?"
_REPO = re.compile(rf"^{_NAME}/{_NAME}$")
_SPLIT = re.compile(r"^(?P<base>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")
_FILE = re.compile(r"^[A-Za-z0-9._+\-/ ()\[\]]{1,512}$")


# ---------------------------------------------------------------------------------------------------------------
# What the reader asked for
# ---------------------------------------------------------------------------------------------------------------
class RemoteError(ValueError):
    """Why a remote model could not be read. kind: bad_input, offline, cors, redirect, insecure, network, timeout,
    stall, slow, truncated, bad_range, not_found, gated, http, too_big, not_a_model."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Target:
    """A remote model: a Hugging Face repo (and maybe one of its GGUF files), or a direct link."""

    hf: str = ""
    file: str = ""
    url: str = ""

    @property
    def key(self) -> tuple:
        return (self.hf, self.file, self.url)

    @property
    def is_gguf(self) -> bool:
        return bool(self.file) or self.url.lower().split("?")[0].endswith(".gguf")

    def describe(self) -> str:
        if self.hf:
            return f"{self.hf}/{self.file}" if self.file else self.hf
        return self.url


def check_repo(text: str) -> str:
    """owner/name as the Hub spells repo ids, or RemoteError."""
    text = (text or "").strip().strip("/")
    if not _REPO.match(text) or ".." in text:
        raise RemoteError(
            "bad_input",
            f"hf: {_quoted(text)} is not a Hugging Face repo id; write it as owner/name (for example "
            "unsloth/gpt-oss-20b-GGUF)",
        )
    return text


def check_file(text: str) -> str:
    """A .gguf file's path inside a repo, or RemoteError."""
    text = (text or "").strip()
    if (
        not _FILE.match(text)
        or ".." in text.split("/")
        or text.startswith("/")
        or not text.lower().endswith(".gguf")
        or "//" in text
    ):
        raise RemoteError(
            "bad_input",
            f"file: {_quoted(text)} is not the name of a .gguf file in the repo (for example model-Q4_K_M.gguf)",
        )
    return text


def check_url(text: str) -> str:
    """An https:// link (to a .gguf file or a config.json), or RemoteError."""
    text = (text or "").strip()
    parts = urlsplit(text) if len(text) <= MAX_INPUT_CHARS else None
    if (
        parts is None
        or parts.scheme != "https"
        or not parts.hostname
        or parts.username
        or parts.password
        or any(c in text for c in " \n\r\t\"'<>\\")
    ):
        raise RemoteError(
            "bad_input",
            f"url: {_quoted(text)} is not an https:// link to a .gguf file or a config.json "
            "(links are read over https only, without credentials)",
        )
    return text


def target_from_values(values) -> Target:
    """The Target of a calculator state's hf / file / url keys (validated), or RemoteError."""
    hf, file, url = (str(values.get(k) or "").strip() for k in ("hf", "file", "url"))
    if hf:
        return Target(hf=check_repo(hf), file=check_file(file) if file else "")
    if url:
        return Target(url=check_url(url))
    raise RemoteError("bad_input", "Name a Hugging Face repo (owner/name) or paste an https:// link first.")


def parse_input(text: str) -> Target:
    """What the reader typed into the panel: owner/name, a huggingface.co page or file link (blob/resolve), or
    any https:// link to a .gguf or config.json."""
    text = (text or "").strip()
    if len(text) > MAX_INPUT_CHARS:
        raise RemoteError("bad_input", f"The text is {len(text):,} characters long: paste a repo id or one link.")
    if not text:
        raise RemoteError("bad_input", "Type a Hugging Face repo (owner/name) or paste an https:// link.")
    low = text.lower()
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "https://hf.co/", "huggingface.co/", "hf.co/"):
        if low.startswith(prefix):
            rest = unquote(text[len(prefix) :].split("?")[0].split("#")[0]).strip("/")
            parts = rest.split("/")
            if len(parts) >= 2 and parts[0] not in ("api", "datasets", "spaces"):
                repo = check_repo("/".join(parts[:2]))
                if len(parts) >= 5 and parts[2] in ("blob", "resolve"):
                    path = "/".join(parts[4:])
                    if path.lower().endswith(".gguf"):
                        return Target(hf=repo, file=check_file(path))
                    if path == "config.json":
                        return Target(hf=repo)
                return Target(hf=repo)
            break
    if "://" in text:
        return Target(url=check_url(text))
    return Target(hf=check_repo(text))


def _quoted(text: str, limit: int = 60) -> str:
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "…")


# URLs on the Hub (https://huggingface.co/docs/hub/api: resolve for a file's bytes, the tree API for the list)
def config_url(repo: str) -> str:
    return f"{HF}/{repo}/resolve/main/config.json"


def tree_url(repo: str) -> str:
    return f"{HF}/api/models/{repo}/tree/main?recursive=true"


def file_url(repo: str, path: str) -> str:
    return f"{HF}/{repo}/resolve/main/{quote(path)}"


def host_of(url: str) -> str:
    return urlsplit(url).hostname or url


# ---------------------------------------------------------------------------------------------------------------
# The Hub's file list: the repo's GGUF files, a split model as one entry
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GGUFFile:
    name: str  # the file= value: the file, or a split model's first part
    size: int  # bytes, all parts
    parts: tuple = ()  # ((path, size), ...) in order

    @property
    def label(self) -> str:
        n = len(self.parts)
        return f"{self.name} ({fmt.gb(self.size)}{f', {n} parts' if n > 1 else ''})"

    @property
    def quant(self) -> tuple:
        """(preset, note) its name says (ggml.file_quant): what to size it as until its header is read."""
        return file_quant(self.name)


def gguf_files(listing) -> list:
    """The GGUF models in a tree listing (a JSON list of {type, path, size, lfs: {size}}), split models grouped,
    vision projectors (mmproj) left out. Hostile listings give an empty or partial list, never an exception."""
    if not isinstance(listing, list):
        return []
    singles, splits = [], {}
    for entry in listing[:MAX_LISTING_FILES]:
        if not isinstance(entry, dict) or entry.get("type", "file") != "file":
            continue
        path = entry.get("path")
        lfs = entry.get("lfs") if isinstance(entry.get("lfs"), dict) else {}
        size = lfs.get("size", entry.get("size"))
        if not isinstance(path, str) or not path.lower().endswith(".gguf") or not isinstance(size, int):
            continue
        if isinstance(size, bool) or size < 0 or not _FILE.match(path) or "mmproj" in path.lower():
            continue
        m = _SPLIT.match(path)
        if m and 1 <= int(m["n"]) <= MAX_SPLITS:
            splits.setdefault((m["base"], int(m["n"])), {})[int(m["i"])] = (path, size)
        else:
            singles.append(GGUFFile(path, size, ((path, size),)))
    for (_base, n), parts in splits.items():
        if sorted(parts) == list(range(1, n + 1)):  # every part listed
            ordered = tuple(parts[i] for i in range(1, n + 1))
            singles.append(GGUFFile(ordered[0][0], sum(s for _p, s in ordered), ordered))
    return sorted(singles, key=lambda f: f.name.lower())


def default_file(files: list):
    """The file to read when the reader named none: a Q4_K_M (the usual download), else a Q4_K, a Q8_0 or the
    smallest."""
    for pattern in ("q4_k_m", "q4_k", "mxfp4", "q8_0"):
        for f in files:
            if pattern in f.name.lower():
                return f
    return min(files, key=lambda f: f.size) if files else None


def split_parts(name: str) -> list:
    """A split model's part names from any part's name (x-00002-of-00003.gguf -> the three), or [name]."""
    m = _SPLIT.match(name)
    if not m or not 1 <= int(m["n"]) <= MAX_SPLITS:
        return [name]
    n = int(m["n"])
    return [f"{m['base']}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]


# ---------------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class Response:
    """What the glue's fetch got: the status, at most `limit` bytes of the body, and the file's total size when the
    server said it (Content-Range: bytes a-b/TOTAL, or the length of a whole 200 response). start: the first byte
    of a 206 by its Content-Range, length: the Content-Length announced (None when a header is missing or hidden
    by CORS); url: where the answer came from after redirects ("" if not known)."""

    status: int
    body: bytes = b""
    total: int | None = None
    start: int | None = None
    length: int | None = None
    url: str = ""


@dataclass
class Progress:
    bytes_read: int = 0
    requests: int = 0
    file_size: int | None = None  # the GGUF file being read (all parts), when known
    what: str = ""  # what is being read now
    notes: list = field(default_factory=list)  # how a host misbehaved without stopping the read

    def text(self) -> str:
        if not self.requests:
            return f"Asking for {self.what}…" if self.what else ""
        size = f" of a {fmt.gb(self.file_size)} file" if self.file_size else ""
        share = f" ({self.bytes_read / self.file_size:.2%} of it)" if self.file_size else ""
        req = "request" if self.requests == 1 else "requests"
        return f"Read {fmt.mib(self.bytes_read)}{size}{share} in {self.requests} {req}: {self.what}"


@dataclass
class RemoteModel:
    target: Target
    model: pm.Model
    kind: str  # "config" (quantization chosen in the page) or "gguf" (the file's own tensor types)
    files: list = field(default_factory=list)  # the repo's GGUF files (hf= only)
    progress: Progress = field(default_factory=Progress)
    note: str = ""

    def summary(self) -> str:
        m = self.model
        what = "config.json" if self.kind == "config" else "GGUF header"
        p = self.progress
        read = f"{fmt.mib(p.bytes_read)} in {p.requests} request{'s' if p.requests != 1 else ''}"
        size = f" of a {fmt.gb(p.file_size)} file" if self.kind == "gguf" and p.file_size else ""
        text = (
            f"{m.name}: {m.num_hidden_layers} layers, {m.total_params() / 1e9:.2f}B parameters, from the {what} of "
            f"{self.target.describe()} (read {read}{size})."
        )
        notes = [self.note, *self.progress.notes] if self.note else list(self.progress.notes)
        return " ".join([text, *notes])


def _http_error(status: int, what: str, url: str) -> RemoteError:
    host = host_of(url)
    if status == 404:
        return RemoteError(
            "not_found",
            f"Not found: {what} on {host} (HTTP 404). Check the spelling of the repo and file names.",
        )
    if status in (401, 403):
        return RemoteError(
            "gated",
            f"{what}: {host} asks for a login (HTTP {status}): the repo is gated or private, or does not exist. "
            "This page never sends credentials: accept the license on the Hub and download the file, or read an "
            "ungated copy of the model.",
        )
    if status == 416:
        return RemoteError("not_a_model", f"{what}: the file on {host} is shorter than its header says (HTTP 416).")
    return RemoteError("http", f"{host} answered HTTP {status} for {what}.")


_DROP_IT = "Download the file and drop it into the GGUF box below instead: only its header is read."


def _duration(s: float) -> str:
    for unit, n in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= 2 * n:
            return f"{s / n:,.0f} {unit}"
    return f"{s:,.0f} s"


def fetch_error(
    kind: str, url: str, *, got: int = 0, expected=None, rate: float = 0.0, need: int = 0, seconds: float | None = None
) -> RemoteError:
    """The message for a request that got no complete answer (the glue classifies the browser's failure).
    got: body bytes received before it ended; expected: the Content-Length announced; rate: bytes/s received
    (slow); need: the bytes asked for; seconds: the time limit that ran out (timeout, stall)."""
    host = host_of(url)
    if kind == "truncated":
        of = f"all of the {expected:,} bytes it announced" if expected else "the end of its answer"
        msg = f"{host} closed the connection before sending {of}: a cut-off answer. Try again."
    elif kind == "slow":
        eta = _duration(need / rate) if rate > 0 else "forever"
        msg = (
            f"{host} is sending about {rate:,.1f} bytes a second: the {fmt.mib(need)} this read asked for would take "
            f"{eta} at that rate, so the read was stopped. Try again later. {_DROP_IT}"
        )
    else:
        wait = seconds if seconds is not None else (STALL_S if kind == "stall" else TIMEOUT_S)
        msg = {
            "offline": f"You are offline. The lab works without a network, but reading {host} needs one.",
            "cors": f"{host} answered, but does not let other sites read its files (CORS). {_DROP_IT}",
            "redirect": (
                f"{host} sent the request on to another address (an HTTP redirect) that this page may not read: "
                f"it does not let other sites read its files (CORS). {_DROP_IT}"
            ),
            "timeout": f"{host} did not answer within {wait:g} s (a slow or stalled connection). Try again.",
            "stall": (
                f"{host} stopped sending after {got:,} bytes: nothing more came for {wait:g} s (a stalled "
                "connection). Try again."
            ),
        }.get(
            kind,
            f"Could not reach {host}, or it broke off before its answer began (no connection to it, an unknown "
            "name, a blocker, or a connection closed mid-answer). Check the link.",
        )
    known = ("offline", "cors", "redirect", "timeout", "stall", "slow", "truncated")
    return RemoteError(kind if kind in known else "network", msg + " The last settings stay.")


class _Reader:
    def __init__(self, fetch, progress_cb):
        self.fetch = fetch
        self.cb = progress_cb
        self.p = Progress()

    def _report(self, what: str = "") -> None:
        if what:
            self.p.what = what
        if self.cb is not None:
            self.cb(self.p)

    async def request(self, url: str, start, end, limit: int) -> Response:
        """One request, counted (every body byte received counts against the cap), its final address checked."""
        r = await self.fetch(url, start, end, limit)
        self.p.requests += 1
        self.p.bytes_read += len(r.body)
        if r.url and urlsplit(r.url).scheme not in ("https", ""):
            raise RemoteError(
                "insecure",
                f"{host_of(url)} redirected the request to {host_of(r.url)} over plain {urlsplit(r.url).scheme}: "
                "this page reads remote models over https only. The last settings stay.",
            )
        return r

    async def get(self, url: str, what: str, limit: int) -> Response:
        self._report(what)
        r = await self.request(url, None, None, limit)
        self._report()
        if r.status >= 400:
            raise _http_error(r.status, what, url)
        return r

    async def json(self, url: str, what: str, limit: int):
        r = await self.get(url, what, limit + 1)
        if r.length is not None and r.length > limit:
            raise RemoteError(
                "not_a_model",
                f"{what}: {host_of(url)} announces {r.length:,} bytes ({fmt.gb(r.length)}), over the "
                f"{fmt.mib(limit)} such a file can be: not what was expected (read {len(r.body):,} bytes of it).",
            )
        if len(r.body) > limit:
            raise RemoteError("not_a_model", f"{what} is over {fmt.mib(limit)}: not what was expected.")
        try:
            text = r.body.decode("utf-8")
            custom.check_json_text(text, what)
            return json.loads(text, parse_constant=lambda c: None)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise RemoteError("not_a_model", f"{what} is not valid JSON.") from None
        except ValueError as e:
            raise RemoteError("not_a_model", str(e)) from None

    async def gguf_header(self, url: str, name: str, size: int | None):
        """One file's header by Range requests in growing slices (never past MAX_HEADER_BYTES in all)."""
        from . import gguf_header as gh

        have = bytearray()
        want = MAX_FIRST_SLICE if size is None else min(MAX_FIRST_SLICE, size)
        whole = False  # the host answers ranges with the whole file (HTTP 200)
        said_total = None  # the file size the host's answers gave
        while True:
            need = want - len(have)
            # a host that ignores ranges sends every slice from byte 0: all of it counts against the cap
            if self.p.bytes_read + (want if whole else need) > MAX_HEADER_BYTES:
                raise _too_big(name, None, url) if whole else _too_big(name, want)
            self._report(f"the header of {name}")
            r = await self.request(url, len(have), want - 1, need)
            if r.status >= 400:
                raise _http_error(r.status, name, url)
            if r.status == 200:  # the whole file from byte 0 (read up to byte want - 1)
                body = r.body[len(have) : want]
                if not whole:
                    whole = True
                    self.p.notes.append(
                        f"{host_of(r.url or url)} ignores byte ranges (it answered a range request with the whole "
                        "file, HTTP 200): each answer was read from the file's start up to the bytes asked for, the "
                        "rest left unsent."
                    )
            elif r.status == 206:
                _check_range(r, name, r.url or url, len(have), want - 1, said_total)  # (who answered)
                body = r.body[:need]
            else:
                raise RemoteError("http", f"{host_of(url)} answered HTTP {r.status} for {name}.")
            if r.total is not None and r.total >= 0:
                said_total = r.total
                if size is None:
                    size = r.total
            self._report()
            if not body:
                raise RemoteError("not_a_model", f"{name}: the file ends after {len(have):,} bytes, inside its header.")
            have += body
            try:
                return gh.read_gguf(bytes(have), max_header_bytes=MAX_HEADER_BYTES, file_size=size), size
            except gh.GGUFLimitError:
                raise _too_big(name, None) from None
            except gh.GGUFTruncated as e:
                if e.end_of_file or e.needed_bytes is None:
                    raise RemoteError("not_a_model", f"{name}: {e}") from None
                if e.needed_bytes > MAX_HEADER_BYTES:
                    raise _too_big(name, e.needed_bytes) from None
                want = max(int(e.needed_bytes), 2 * len(have))
                want = min(want, MAX_HEADER_BYTES, size if size is not None else want)
                if want <= len(have):
                    raise RemoteError("not_a_model", f"{name}: {e}") from None
            except ValueError as e:
                raise RemoteError("not_a_model", f"{name} is not a GGUF model file we can read: {e}") from None

    async def gguf_model(self, parts: list, name: str, total_size: int | None) -> pm.Model:
        """parts: [(url, name, size or None)]; the first part's header has the metadata, every part its tensors."""
        self.p.file_size = total_size
        first, size0 = await self.gguf_header(*parts[0])
        count = first.metadata.get("split.count", 1)
        if not isinstance(count, int) or isinstance(count, bool):
            count = 1
        if count > 1 and count != len(parts):
            raise RemoteError(
                "not_a_model",
                f"{name} says it is part 1 of {count}, but its name says {len(parts)}: not a split we can read.",
            )
        tensors = list(first.tensors)
        sizes = [size0]
        for url, part, size in parts[1:]:
            h, s = await self.gguf_header(url, part, size)
            tensors += h.tensors
            sizes.append(s)
        if total_size is None and all(s is not None for s in sizes):
            self.p.file_size = sum(sizes)
        want = first.metadata.get("split.tensors.count")
        if count > 1 and isinstance(want, int) and want != len(tensors):
            raise RemoteError(
                "not_a_model", f"{name}: the parts list {len(tensors):,} tensors, the first says {want:,}."
            )
        header = dataclasses.replace(first, tensors=tensors)
        try:
            return pm.model_from_gguf(header)
        except ValueError as e:
            raise RemoteError("not_a_model", f"{name}: {e}") from None


def _check_range(r: Response, name: str, url: str, start: int, end: int, total) -> None:
    """A 206 answer must be the range asked for (as far as its readable headers say)."""
    span = end - start + 1
    problem = None
    if r.start is not None and r.start != start:
        problem = f"bytes from {r.start:,} on (its Content-Range)"
    elif r.length is not None and r.length > span:
        problem = f"{r.length:,} bytes ({fmt.gb(r.length)}, its Content-Length)"
    elif r.total is not None and total is not None and r.total != total:
        problem = f"a file of {r.total:,} bytes, after an earlier answer said {total:,}"
    if problem:
        raise RemoteError(
            "bad_range",
            f"{name}: {host_of(url)} answered the request for bytes {start:,}-{end:,} ({fmt.mib(span)}) with "
            f"{problem}. A host whose answers do not match the byte ranges asked for cannot be read safely; "
            "nothing was taken from it. The last settings stay.",
        )


def _too_big(name: str, claimed, ignores_range_url: str = "") -> RemoteError:
    cap = fmt.mib(MAX_HEADER_BYTES)
    if ignores_range_url:
        return RemoteError(
            "too_big",
            f"{name}: {host_of(ignores_range_url)} ignores byte ranges (it answers with the whole file, HTTP 200), "
            f"so every slice of the header comes from the file's start, and the next one would pass the {cap} this "
            "page reads at most from a remote model. Download the file and drop it into the GGUF box below instead.",
        )
    said = (
        f"{claimed:,} bytes, more than the {cap}" if claimed else f"more than the {cap}"
    ) + " this page reads at most from a remote model"
    return RemoteError(
        "too_big",
        f"{name}: its header claims {said} (real headers are a few MB): a damaged or hostile file.",
    )


async def read(target: Target, fetch, progress=None) -> RemoteModel:
    """Read a remote model (see the module docstring). fetch(url, start, end, limit) -> Response (start/end: a
    byte range, or None for the whole body; limit: the most body bytes to keep, except that a 200 answer to a
    range request, a server ignoring the range, is kept up to byte `end`), raising RemoteError for a request with
    no answer. progress(Progress) is called as bytes arrive. Raises RemoteError."""
    rd = _Reader(fetch, progress)
    if target.url:
        url = check_url(target.url)
        name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or url
        if target.is_gguf:
            names = split_parts(name)
            base = url.split("?")[0].rsplit("/", 1)[0]
            parts = [(url if n == name else f"{base}/{quote(n)}", n, None) for n in names]
            if names[0] != name:  # a later part was linked: start from the first
                parts = [(f"{base}/{quote(n)}", n, None) for n in names]
            model = await rd.gguf_model(parts, names[0], None)
            return RemoteModel(target, model, "gguf", progress=rd.p)
        cfg = await rd.json(url, name, custom.CONFIG_MAX_CHARS)
        return RemoteModel(target, _config_model(cfg, name, url), "config", progress=rd.p)

    repo = check_repo(target.hf)
    listing = await rd.json(tree_url(repo), f"the file list of {repo}", MAX_LISTING_BYTES)
    files = gguf_files(listing)
    note = ""
    chosen = None
    if target.file:
        name = check_file(target.file)
        chosen = next((f for f in files if f.name == name or any(p == name for p, _s in f.parts)), None)
        if chosen is None:
            names = split_parts(name)
            chosen = GGUFFile(names[0], 0, tuple((n, None) for n in names))
    else:
        try:
            cfg = await rd.json(config_url(repo), f"{repo}/config.json", custom.CONFIG_MAX_CHARS)
        except RemoteError as e:
            if e.kind != "not_found" or not files:
                raise
            chosen = default_file(files)
            note = f"The repo has no config.json: read the header of {chosen.name}."
        else:
            return RemoteModel(target, _config_model(cfg, repo, config_url(repo)), "config", files, rd.p)
    parts = [(file_url(repo, p), p, s) for p, s in chosen.parts]
    model = await rd.gguf_model(parts, chosen.name, chosen.size or None)
    return RemoteModel(Target(hf=repo, file=chosen.name), model, "gguf", files, rd.p, note)


def _config_model(cfg, name: str, url: str) -> pm.Model:
    if not isinstance(cfg, dict):
        raise RemoteError("not_a_model", f"{name}: config.json must be a JSON object.")
    label = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) else name
    try:
        return pm.model_from_hf_config(cfg, name=label or name)
    except ValueError as e:
        raise RemoteError("not_a_model", f"config.json of {name}: {e}") from None


# ---------------------------------------------------------------------------------------------------------------
# What this page has read (the calculator's model=remote), and what it is doing
# ---------------------------------------------------------------------------------------------------------------
_LOADED: dict = {}  # Target.key -> RemoteModel
_STATUS: dict = {}  # Target.key -> (text, is_error)
_MAX_LOADED = 8


def remember(rm: RemoteModel, asked: Target | None = None) -> None:
    """Keep a model read for its target (and for what was asked, when the reader named no file)."""
    if len(_LOADED) >= _MAX_LOADED:
        _LOADED.clear()
    for t in {rm.target, asked or rm.target}:
        _LOADED[t.key] = rm
        _STATUS.pop(t.key, None)


def set_status(target: Target, text: str, error: bool = False) -> None:
    if len(_STATUS) > 64:
        _STATUS.clear()
    _STATUS[target.key] = (text, error)


def loaded(values) -> RemoteModel | None:
    """The model read for a state's hf / file / url, if it has been."""
    try:
        return _LOADED.get(target_from_values(values).key)
    except RemoteError:
        return None


def status(values) -> tuple:
    """(text, is_error) about a state's remote model that is not read: reading, or why it could not be."""
    try:
        t = target_from_values(values)
    except RemoteError as e:
        return str(e), True
    return _STATUS.get(t.key, (f"Reading {t.describe()}…", False))


def wants_remote(values) -> bool:
    return bool(str(values.get("hf") or "").strip() or str(values.get("url") or "").strip())


def command_for(rm: RemoteModel, command: str) -> str:
    """The llama-server command for a remote model: -m <file> becomes llama.cpp's own download flags, -hf owner/repo
    with -hff <file> (common/arg.cpp --hf-repo, --hf-file), or -mu <link> (--model-url) for a direct .gguf link."""
    parts = command.split(" ")
    if rm.kind != "gguf" or "-m" not in parts:
        return command
    i = parts.index("-m")
    if rm.target.hf:
        flags = ["-hf", rm.target.hf, "-hff", rm.target.file]
    else:
        flags = ["-mu", rm.target.url]
    return " ".join(parts[:i] + flags + parts[i + 2 :])


def files_options(rm: RemoteModel | None) -> list:
    """(value, label) for the panel's list of the repo's GGUF files."""
    if rm is None or not rm.files:
        return []
    return [(f.name, f.label) for f in rm.files]
