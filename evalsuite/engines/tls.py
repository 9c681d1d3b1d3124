"""The TLS setting of an engine's HTTP client, without loading CA certificates a plain-http endpoint never uses.

httpx builds a verifying SSL context for every client, and loading the system's
CA bundle into it costs ~25 ms of CPU: over a 400-request run against a local
server that is more than the rest of the run's setup.  For an `http://`
endpoint reached without an https proxy no TLS handshake ever happens, so the
client gets a context that still verifies (hostname and certificate required)
but trusts no authority: were a TLS connection ever attempted, it would fail
rather than go unchecked.  Every `https://` endpoint keeps httpx's full default
verification.
"""

from __future__ import annotations

import ssl
import urllib.request


def client_verify(base_url: str) -> ssl.SSLContext | bool:
    """What to pass as httpx's `verify` for a client that talks to `base_url` only."""
    if not base_url.lower().startswith("http://") or _https_proxy():
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname and CERT_REQUIRED, no trusted CAs


def _https_proxy() -> bool:
    """Whether the environment routes requests through a proxy reached over TLS (that one needs the CAs)."""
    return any(str(url).lower().startswith("https://") for url in urllib.request.getproxies().values())
