"""Raw HTTP for the tests that must send what no client library would (bad JSON, odd bodies)."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlparse


def post(url: str, path: str, body: bytes | dict | str, key: str | None = None,
         timeout: float = 120) -> tuple[int, dict[str, str], bytes]:
    """POST and read the whole answer: (status, headers, body)."""
    parsed = urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
    data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        connection.request("POST", path, data, headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def open_stream(url: str, path: str, body: dict, key: str | None = None) -> tuple[http.client.HTTPConnection,
                                                                              http.client.HTTPResponse]:
    """Start a streaming request and return the open connection (close it to hang up)."""
    parsed = urlparse(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    connection.request("POST", path, json.dumps({**body, "stream": True}).encode(), headers)
    return connection, connection.getresponse()


def error_message(body: bytes) -> str:
    error = json.loads(body)["error"]
    assert set(error) >= {"message", "type", "code"}
    return error["message"]
