"""An engine's TLS setting: full verification for https, no CA loading (and no way to skip checks) for http."""

from __future__ import annotations

import ssl

import httpcore
import httpx
import pytest

from evalsuite.config import TargetConfig
from evalsuite.engines import make_engine
from evalsuite.engines.tls import client_verify


def test_https_endpoint_keeps_default_verification() -> None:
    assert client_verify("https://api.example.com/v1") is True
    assert client_verify("HTTPS://api.example.com/v1") is True


def test_plain_http_endpoint_gets_a_context_that_still_verifies_but_trusts_no_one() -> None:
    context = client_verify("http://127.0.0.1:8080/v1")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0  # any TLS handshake would fail, never pass unchecked


@pytest.mark.parametrize("var", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
def test_an_https_proxy_needs_the_certificates(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, "https://proxy.internal:3128")
    assert client_verify("http://127.0.0.1:8080/v1") is True


def test_a_plain_http_proxy_needs_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    context = client_verify("http://127.0.0.1:8080/v1")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.cert_store_stats()["x509_ca"] == 0


@pytest.mark.asyncio
async def test_engine_client_behind_a_plain_proxy_uses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")  # httpx's own transport then carries the request
    engine = make_engine(TargetConfig(name="t", engine="openai", base_url="http://127.0.0.1:9/v1"))
    try:
        transport = engine.http._transport_for_url(httpx.URL("http://127.0.0.1:9/v1/models"))
        assert isinstance(transport, httpx.AsyncHTTPTransport)
        pool = transport._pool  # httpx's transport keeps its proxy and context here
        assert isinstance(pool, httpcore.AsyncHTTPProxy) and pool._proxy_url.host == b"proxy.internal"
        assert pool._ssl_context.cert_store_stats()["x509_ca"] == 0
    finally:
        await engine.aclose()
