"""timeout_s bounds a whole request, and bodies are capped before and after decompression."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from pathlib import Path

import httpx
import pytest
from fake_server import FakeServer, Fault
from projects import make_project

from evalsuite.config import load_config
from evalsuite.engines.body import read_body
from evalsuite.engines.retry import RequestFailed
from evalsuite.errors import EndpointError
from evalsuite.runner import execute, plan_run
from evalsuite.store import open_run

HANG_GUARD_S = 60.0  # turns a hang into a test failure; the runs below end after about timeout_s


def _run_expecting_failure(config: Path) -> str:
    plan = plan_run(load_config(config), "base", "echo")
    with pytest.raises(EndpointError) as info:
        asyncio.run(asyncio.wait_for(execute(plan), HANG_GUARD_S))
    return str(info.value)


@pytest.mark.parametrize(
    ("fault", "stream"),
    [(Fault("drip", delay_s=0.05), False), (Fault("drip", delay_s=0.05), True), (Fault("endless", delay_s=0.02), True)],
    ids=["drip", "drip-stream", "endless-stream"],
)
def test_slow_drip_and_endless_bodies_hit_the_total_deadline(
    fault: Fault, stream: bool, tmp_path: Path, fake_server: FakeServer
) -> None:
    fault.match, fault.times = "Question q0001", -1
    fake_server.state.faults = [fault]
    extra = "timeout_s = 0.5\nmax_retries = 0\n" + ("stream = true\n" if stream else "")
    message = _run_expecting_failure(make_project(tmp_path, fake_server.base_url, target_extra=extra))
    assert "q0001" in message and "no complete response within timeout_s = 0.5 s" in message
    (folder,) = (tmp_path / "runs" / "base" / "echo").iterdir()
    assert sorted(open_run(folder).results()) == ["q0000"]


def test_an_oversized_body_is_refused(tmp_path: Path, fake_server: FakeServer) -> None:
    fake_server.state.faults = [Fault("oversize", match="Question q0000", times=-1, size=3 * 2**20)]
    config = make_project(tmp_path, fake_server.base_url, target_extra="max_response_mb = 1\nmax_retries = 0")
    assert "exceeds the 1 MiB cap (max_response_mb)" in _run_expecting_failure(config)


def test_a_gzip_bomb_is_stopped_at_the_cap_without_inflating_it(tmp_path: Path, fake_server: FakeServer) -> None:
    size = 128 * 2**20
    fake_server.state.faults = [Fault("gzip_bomb", match="Question q0000", times=-1, size=size)]
    config = make_project(tmp_path, fake_server.base_url, target_extra="max_response_mb = 1\nmax_retries = 0")
    tracemalloc.start()
    try:
        message = _run_expecting_failure(config)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "decompressed" in message and "1 MiB cap" in message
    assert peak < size // 8  # the server's own compression buffers included; inflating it would take 128 MiB


def _response(data: bytes, encoding: str | None) -> httpx.Response:
    headers = {"content-encoding": encoding} if encoding else {}
    return httpx.Response(200, headers=headers, stream=httpx.ByteStream(data))


@pytest.mark.parametrize(
    ("encoding", "pack"),
    [
        (None, lambda b: b),
        ("gzip", gzip.compress),
        ("gzip", lambda b: gzip.compress(b[:100]) + gzip.compress(b[100:])),  # two members
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
        ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
    ],
    ids=["identity", "gzip", "gzip-members", "deflate", "raw-deflate", "gzip-twice"],
)
def test_bodies_decode_in_every_accepted_coding(encoding: str | None, pack) -> None:
    body = b'{"choices": [%s]}' % b", ".join(b'{"text": "%d"}' % i for i in range(500))
    assert asyncio.run(read_body(_response(pack(body), encoding), 2**20)) == body
    with pytest.raises(RequestFailed) as info:
        asyncio.run(read_body(_response(pack(body), encoding), len(body) - 1))
    assert info.value.kind == "too_large"


def test_corrupt_and_unasked_codings_are_malformed() -> None:
    for data, encoding, words in [(b"not gzip at all", "gzip", "corrupt"), (b"\x00\x01", "br", "not asked for")]:
        with pytest.raises(RequestFailed, match=words) as info:
            asyncio.run(read_body(_response(data, encoding), 2**20))
        assert info.value.kind == "malformed"
