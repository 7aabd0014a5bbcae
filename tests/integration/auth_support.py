"""Keys, tokens and a real JWKS endpoint on loopback for the access-control tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

SECRET = "a-shared-secret-of-at-least-32-bytes!"
READ_TOKEN = "read-token-0123456789"
OPERATE_TOKEN = "operate-token-0123456789"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def rsa_key() -> rsa.RSAPrivateKey:
    """A fresh 2048-bit RSA key."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ec_key() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 key."""
    return ec.generate_private_key(ec.SECP256R1())


def public_jwk(key: PrivateKey, kid: str, **extra: Any) -> dict[str, Any]:
    """The public half of ``key`` as a JWK with ``kid``."""
    if isinstance(key, rsa.RSAPrivateKey):
        data: dict[str, Any] = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        data = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    data.update(kid=kid, **extra)
    return data


def claims(**overrides: Any) -> dict[str, Any]:
    """Valid claims for one hour, for subject alice with both scopes; ``None`` drops one."""
    now = int(time.time())
    values: dict[str, Any] = {
        "sub": "alice",
        "iat": now,
        "exp": now + 3600,
        "scope": "bulkops.read bulkops.operate",
    }
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def hs256(**overrides: Any) -> str:
    """A token signed with the shared secret."""
    return jwt.encode(claims(**overrides), SECRET, algorithm="HS256")


def signed(key: PrivateKey, kid: str | None, **overrides: Any) -> str:
    """A token signed with ``key`` (RS256 for RSA, ES256 for EC)."""
    algorithm = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode(claims(**overrides), key, algorithm=algorithm, headers=headers)


def bearer(token: str) -> dict[str, str]:
    """The Authorization header for ``token``."""
    return {"Authorization": f"Bearer {token}"}


class JwksServer:
    """Serves a JWKS document over HTTP on a free loopback port and counts the fetches."""

    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.fetches = 0
        self.status = 200
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                body = json.dumps({"keys": owner.keys}).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # one line per request would drown the test output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._stopped = False
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}/.well-known/jwks.json"

    def start(self) -> None:
        """Start answering."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and free the port (once)."""
        if not self._stopped:
            self._stopped = True
            self._server.shutdown()
            self._server.server_close()


@contextmanager
def jwks_server() -> Iterator[JwksServer]:
    """A running JWKS server, stopped afterwards."""
    server = JwksServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
