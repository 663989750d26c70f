"""HTTP by hand, over a socket: for clients that stall, trickle or stop half-way, which
an HTTP library will not be."""

from __future__ import annotations

import json
import socket
from typing import Any

BOUNDARY = "asrserve-fault-boundary-5d1e"


def multipart_head(filename: str = "stalled.wav") -> bytes:
    """A multipart body up to the start of the file part's bytes."""
    return (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
        f"--{BOUNDARY}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()


def raw_upload(
    port: int, path: str, *, headers: str = "", declared: int = 200_000, body: bytes = b""
) -> socket.socket:
    """A raw client that starts a multipart upload of ``declared`` bytes and sends only the
    part's head and ``body``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode()
    sock.sendall(head + multipart_head() + body)
    return sock


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, headers and JSON body of the one response, without waiting for the server to
    close the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        received = sock.recv(65536)
        assert received, f"the server closed the connection without an answer: {data!r}"
        data += received
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, json.loads(body)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], dict[str, Any], bool]:
    """Status, headers and JSON body of the one response; and whether the server closed."""
    status, headers, body = read_answer(sock)
    closed = sock.recv(1) == b""
    return status, headers, body, closed
