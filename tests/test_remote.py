"""Reading a model from Hugging Face or a link (enginelab.remote, issue 16), with a fake Hub and file host: the
reader's requests (only headers, by Range, in growing slices, never past its cap), split files, the errors and
their messages, and what the reader types."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import remote_fixtures as rf  # noqa: E402

import perf_model as pm  # noqa: E402
from enginelab import remote  # noqa: E402

HF = "https://huggingface.co"
SITE = rf.site()


class FakeNet:
    """fetch(url, start, end, limit) over rf.site(); records every request; `fail` maps a URL to a failure kind."""

    def __init__(self, fail=None, ignore_range=False):
        self.site = dict(SITE)
        self.fail = fail or {}
        self.ignore_range = ignore_range
        self.requests = []  # (url, start, end, bytes sent)

    async def fetch(self, url, start, end, limit):
        if url in self.fail:
            raise remote.fetch_error(self.fail[url], url)
        entry = self.site.get(url, (404, b"Not Found", None))
        if self.ignore_range and start is not None:
            status, body, total = rf.serve(entry, 0, end, end + 1)  # the whole file from byte 0 (cut at end)
            status = 200
        else:
            status, body, total = rf.serve(entry, start, end, limit)
        if limit is not None and not (status == 200 and start is not None):
            body = body[:limit]  # a 200 answer to a range request is read up to end + 1 (the glue's contract)
        self.requests.append((url, start, end, len(body)))
        return remote.Response(status, body, total)


def read(target, net):
    """remote.read run to its end on an event loop of its own, in a thread: in `build.py test` the browser tests
    run first in the same process, and Playwright's sync API keeps a loop running in this thread."""
    seen = []
    with ThreadPoolExecutor(1) as pool:
        rm = pool.submit(asyncio.run, remote.read(target, net.fetch, lambda p: seen.append(p.text()))).result()
    return rm, seen


def test_a_repo_with_config_json_only():
    net = FakeNet()
    rm, seen = read(remote.Target(hf=rf.CONFIG_REPO), net)
    assert rm.kind == "config" and rm.files == [] and rm.model.num_hidden_layers == 4
    assert [u for u, *_ in net.requests] == [remote.tree_url(rf.CONFIG_REPO), remote.config_url(rf.CONFIG_REPO)]
    assert all(s is None for _u, s, _e, _n in net.requests)  # whole small files, no ranges
    assert "config.json" in rm.summary() and seen


def test_a_gguf_repo_lists_its_files_and_reads_one_header_by_range():
    net = FakeNet()
    rm, seen = read(remote.Target(hf=rf.REPO), net)
    # no config.json in a GGUF repo: the Q4_K_M file is read (and named, so the link can carry it)
    assert rm.kind == "gguf" and rm.target == remote.Target(hf=rf.REPO, file=rf.FILE)
    assert "no config.json" in rm.note
    names = [f.name for f in rm.files]
    assert names == sorted(names, key=str.lower) and "mmproj-tiny-f16.gguf" not in names
    split = next(f for f in rm.files if f.name == rf.SPLIT.format(1))
    assert len(split.parts) == 3 and split.size == sum(rf.SPLIT_SIZES)
    # the header (1.8 MB) took growing slices: the first 1 MiB, then exactly what it said it needed (or double)
    ranges = [(s, e) for u, s, e, _n in net.requests if u.endswith(rf.FILE)]
    assert ranges[0] == (0, remote.MAX_FIRST_SLICE - 1)
    assert all(ranges[i + 1][0] == ranges[i][1] + 1 for i in range(len(ranges) - 1))  # each asks only new bytes
    header = len(rf.tiny_header())
    fetched = ranges[-1][1] + 1
    assert header <= fetched <= 2 * header and rm.progress.bytes_read < 3 * header
    assert rm.progress.file_size == rf.TINY_SIZE and rm.progress.bytes_read / rf.TINY_SIZE < 0.001
    assert "of a 4.9 GB file" in seen[-1]
    # the model is the file's own: its tensor types
    assert rm.model.gguf_tensors and pm.quantize_plan(rm.model, None)[0]["type"] in ("Q4_K", "Q6_K", "F32")


def test_a_named_file_and_a_split_model():
    net = FakeNet()
    rm, _ = read(remote.Target(hf=rf.REPO, file=rf.SPLIT.format(1)), net)
    urls = [u for u, *_ in net.requests]
    for i in range(3):
        assert any(u.endswith(rf.SPLIT.format(i + 1)) for u in urls)
    assert len(rm.model.gguf_tensors) == len(pm.quantize_plan(rf.tiny_model(), "Q8_0"))
    assert rm.progress.file_size == sum(rf.SPLIT_SIZES)
    # naming a later part reads from the first
    net = FakeNet()
    rm2, _ = read(remote.Target(hf=rf.REPO, file=rf.SPLIT.format(2)), net)
    assert rm2.model.total_params() == rm.model.total_params()


def test_direct_links_to_a_gguf_and_to_a_config():
    net = FakeNet()
    rm, _ = read(remote.Target(url=f"{rf.HOST}/models/{rf.FILE}"), net)
    assert rm.kind == "gguf" and rm.progress.file_size == rf.TINY_SIZE  # from Content-Range
    rm, _ = read(remote.Target(url=f"{rf.HOST}/models/{rf.SPLIT.format(1)}"), net)
    assert rm.progress.file_size == sum(rf.SPLIT_SIZES)
    rm, _ = read(remote.Target(url=f"{rf.HOST}/models/config.json"), net)
    assert rm.kind == "config" and rm.model.hidden_size == 512


def test_a_server_that_ignores_range_still_costs_only_the_header():
    net = FakeNet(ignore_range=True)
    rm, _ = read(remote.Target(url=f"{rf.HOST}/models/{rf.FILE}"), net)
    assert rm.model.num_hidden_layers == 4
    sent = sum(n for *_x, n in net.requests)
    assert sent < 3 * len(rf.tiny_header())
    assert rm.progress.bytes_read == sent  # every byte sent counts, the re-sent start of the file too
    assert "ignores byte ranges" in rm.summary()


def test_a_server_that_ignores_range_is_held_to_the_cap_by_what_it_sends():
    # the header asks for more and more; each answer re-sends the file from byte 0, and that counts
    big = rf.tiny_header(vocab_tokens=400_000)  # ~7.6 MB
    net = FakeNet(ignore_range=True)
    net.site[f"{rf.HOST}/models/big.gguf"] = (200, big, 20_000_000_000)
    old = remote.MAX_HEADER_BYTES
    remote.MAX_HEADER_BYTES = 6 << 20
    try:
        with pytest.raises(remote.RemoteError) as e:
            read(remote.Target(url=f"{rf.HOST}/models/big.gguf"), net)
    finally:
        remote.MAX_HEADER_BYTES = old
    assert e.value.kind == "too_big" and "ignores byte ranges" in str(e.value)
    # every answer came from byte 0 up to the byte asked for, and all of it counted: 1 MiB, then the ~3.2 MB the
    # header said it needed (4.1 MiB in all); the next slice (at least twice that) would pass 6 MiB, so it was not
    # asked for
    assert [(s, n) for _u, s, _e, n in net.requests] == [(0, 1 << 20), (1 << 20, net.requests[1][2] + 1)]
    assert sum(n for *_x, n in net.requests) + 2 * net.requests[1][3] > 6 << 20


class LyingNet(FakeNet):
    """FakeNet whose 206 answers are changed by `lie(start, end, response)`."""

    def __init__(self, lie):
        super().__init__()
        self.lie = lie

    async def fetch(self, url, start, end, limit):
        r = await super().fetch(url, start, end, limit)
        if r.status == 206:
            r.start, r.length = start, len(r.body)
            self.lie(start, end, r)
        return r


@pytest.mark.parametrize(
    "lie, words",
    [
        # the range starts 4096 bytes later than asked (Content-Range: bytes 4096-...)
        (
            lambda s, e, r: setattr(r, "start", s + 4096),
            "answered the request for bytes 0-1,048,575 (1.00 MiB) with bytes from 4,096 on",
        ),
        # a Content-Length of 50 GB for a 1 MiB range
        (lambda s, e, r: setattr(r, "length", 50 * 1024**3), "with 53,687,091,200 bytes (53.7 GB, its Content-Length)"),
        # the file's size changes between the first and the second answer
        (
            lambda s, e, r: setattr(r, "total", r.total + (s > 0)),
            f"a file of {rf.TINY_SIZE + 1:,} bytes, after an earlier answer said {rf.TINY_SIZE:,}",
        ),
    ],
)
def test_a_206_that_is_not_the_range_asked_for_stops_the_read(lie, words):
    net = LyingNet(lie)
    with pytest.raises(remote.RemoteError) as e:
        read(remote.Target(url=f"{rf.HOST}/models/{rf.FILE}"), net)
    assert e.value.kind == "bad_range" and words in str(e.value), str(e.value)
    assert "cannot be read safely" in str(e.value)


def test_a_redirect_to_plain_http_and_a_json_announced_too_long():
    class Net(FakeNet):
        async def fetch(self, url, start, end, limit):
            r = await super().fetch(url, start, end, limit)
            if url.endswith(".gguf"):
                r.url = "http://mirror.example.net/x.gguf"
            else:
                r.length = 50 * 1024**3
            return r

    with pytest.raises(remote.RemoteError) as e:
        read(remote.Target(url=f"{rf.HOST}/models/{rf.FILE}"), Net())
    assert e.value.kind == "insecure" and "to mirror.example.net over plain http" in str(e.value)
    with pytest.raises(remote.RemoteError) as e:
        read(remote.Target(url=f"{rf.HOST}/models/config.json"), Net())
    assert e.value.kind == "not_a_model" and "announces 53,687,091,200 bytes (53.7 GB)" in str(e.value)


def test_the_glue_failures_name_what_the_host_did():
    url = f"{rf.HOST}/models/{rf.FILE}"
    e = remote.fetch_error("slow", url, rate=1.0, need=1 << 20)
    # 1,048,576 bytes at 1 byte a second: 12.1 days
    assert e.kind == "slow" and "about 1.0 bytes a second" in str(e) and "would take 12 days" in str(e)
    e = remote.fetch_error("truncated", url, got=300, expected=1 << 20)
    assert "closed the connection before sending all of the 1,048,576 bytes it announced" in str(e)
    e = remote.fetch_error("stall", url, got=5000, seconds=20)
    assert e.kind == "stall" and "stopped sending after 5,000 bytes: nothing more came for 20 s" in str(e)
    e = remote.fetch_error("redirect", url)
    assert e.kind == "redirect" and "files.example.org sent the request on to another address" in str(e)
    assert all(str(remote.fetch_error(k, url)).endswith("The last settings stay.") for k in ("slow", "network"))


@pytest.mark.parametrize(
    "target, fail, kind, words",
    [
        (remote.Target(hf="lab-test/No-Such-Repo"), {}, "not_found", "Not found"),
        (remote.Target(hf=rf.GATED_REPO), {}, "gated", "asks for a login (HTTP 401)"),
        (remote.Target(hf=rf.REPO, file="missing-Q4_K_M.gguf"), {}, "not_found", "missing-Q4_K_M.gguf"),
        (remote.Target(url=f"{rf.HOST}/models/{rf.FILE}"), {f"{rf.HOST}/models/{rf.FILE}": "cors"}, "cors", "CORS"),
        (remote.Target(hf=rf.REPO), {remote.tree_url(rf.REPO): "offline"}, "offline", "You are offline"),
        (remote.Target(hf=rf.REPO), {remote.tree_url(rf.REPO): "timeout"}, "timeout", "did not answer within"),
        (remote.Target(hf=rf.REPO), {remote.tree_url(rf.REPO): "network"}, "network", "Could not reach"),
    ],
)
def test_every_failure_has_its_own_plain_message(target, fail, kind, words):
    with pytest.raises(remote.RemoteError) as e:
        read(target, FakeNet(fail))
    assert e.value.kind == kind and words in str(e.value)


def test_a_huge_claimed_header_is_refused_after_the_first_slice():
    net = FakeNet()
    with pytest.raises(remote.RemoteError) as e:
        read(remote.Target(url=f"{rf.HOST}/models/huge.gguf"), net)
    assert e.value.kind == "too_big" and "1,099,511,627,776" not in str(e.value)
    assert "more than the 64.00 MiB this page reads" in str(e.value)
    assert len(net.requests) == 1 and net.requests[0][3] <= remote.MAX_FIRST_SLICE


def test_the_cap_holds_whatever_the_header_says():
    # a header that keeps asking for more: every step is bounded and the total never passes the cap
    big = rf.tiny_header(vocab_tokens=400_000)  # ~7.6 MB
    net = FakeNet()
    net.site[f"{rf.HOST}/models/big.gguf"] = (200, big, 20_000_000_000)
    old = remote.MAX_HEADER_BYTES
    remote.MAX_HEADER_BYTES = 4 << 20
    try:
        with pytest.raises(remote.RemoteError) as e:
            read(remote.Target(url=f"{rf.HOST}/models/big.gguf"), net)
    finally:
        remote.MAX_HEADER_BYTES = old
    assert e.value.kind == "too_big"
    assert sum(n for *_x, n in net.requests) <= 4 << 20


@pytest.mark.parametrize(
    "text, want",
    [
        ("unsloth/gpt-oss-20b-GGUF", remote.Target(hf="unsloth/gpt-oss-20b-GGUF")),
        ("https://huggingface.co/Qwen/Qwen3-8B", remote.Target(hf="Qwen/Qwen3-8B")),
        (
            "https://huggingface.co/unsloth/gpt-oss-20b-GGUF/blob/main/gpt-oss-20b-Q4_K_M.gguf",
            remote.Target(hf="unsloth/gpt-oss-20b-GGUF", file="gpt-oss-20b-Q4_K_M.gguf"),
        ),
        (
            "hf.co/a/b/resolve/main/UD-Q4_K_XL/m-00001-of-00002.gguf?download=true",
            remote.Target(hf="a/b", file="UD-Q4_K_XL/m-00001-of-00002.gguf"),
        ),
        ("https://huggingface.co/a/b/blob/main/config.json", remote.Target(hf="a/b")),
        ("https://example.com/m.gguf", remote.Target(url="https://example.com/m.gguf")),
    ],
)
def test_what_the_reader_types(text, want):
    assert remote.parse_input(text) == want


@pytest.mark.parametrize(
    "text",
    ["", "x", "a/b/c", "../etc", "http://example.com/m.gguf", "https://user:pw@example.com/m.gguf", "javascript:alert(1)",
     "a/b" + "c" * 3000, "https://huggingface.co/a/b/blob/main/../../x.gguf", "<script>/x"],
)  # fmt: skip
def test_bad_input_is_refused_with_a_message(text):
    with pytest.raises(remote.RemoteError) as e:
        remote.parse_input(text)
    assert e.value.kind == "bad_input" and str(e.value)


def test_hostile_listings_give_no_files_not_errors():
    for listing in (
        None,
        {},
        "x",
        [1, None, {"path": 3}],
        [{"path": "a.gguf", "size": -1}],
        [{"path": "a.gguf", "size": True}],
    ):
        assert remote.gguf_files(listing) == []
    # a split with a missing part is not offered
    listing = [{"path": "m-00001-of-00002.gguf", "size": 5}]
    assert remote.gguf_files(listing) == []


def test_the_calculator_state_reads_what_was_loaded():
    from enginelab import scenario
    from enginelab.figures import calculator

    state, msgs = calculator.SPEC.from_query(f"?hf={rf.REPO}&file={rf.FILE}")
    assert state.model == "remote" and not msgs
    scn = calculator.compute(state)
    assert scn.error and "Reading" in scn.error and scn.placement is None
    rm, _ = read(remote.Target(hf=rf.REPO, file=rf.FILE), FakeNet())
    remote.remember(rm)
    scenario._CACHE.clear()
    scn = calculator.compute(state)
    assert scn.error is None and scn.model is rm.model and scn.quant is None
    # the link keeps hf and file, and not model=remote (the default when hf is there)
    assert calculator.SPEC.to_query(state) == f"?hf={rf.REPO.replace('/', '%2F')}&file={rf.FILE}"
    # choosing a catalog model in the form drops the remote keys
    form = {"model": "qwen2.5-7b", "hf": rf.REPO, "file": rf.FILE}
    s2, _ = calculator.SPEC.from_form(form)
    assert s2.model == "qwen2.5-7b" and s2.hf == "" and s2.file == ""


def test_the_command_line_downloads_the_same_file():
    rm, _ = read(remote.Target(hf=rf.REPO, file=rf.FILE), FakeNet())
    cmd = remote.command_for(rm, "llama-server -m Tiny-Llama-model.gguf -c 8192 -fa on")
    assert cmd == f"llama-server -hf {rf.REPO} -hff {rf.FILE} -c 8192 -fa on"
    rm, _ = read(remote.Target(url=f"{rf.HOST}/models/{rf.FILE}"), FakeNet())
    assert (
        remote.command_for(rm, "llama-server -m x.gguf -c 4096")
        == f"llama-server -mu {rf.HOST}/models/{rf.FILE} -c 4096"
    )
    rm, _ = read(remote.Target(hf=rf.CONFIG_REPO), FakeNet())
    assert remote.command_for(rm, "llama-server -m x.gguf") == "llama-server -m x.gguf"  # a config: no file to name
