"""Schedulers and workers: addresses where something that is not Dask listens, or nothing valid at all, and
more workers than the machine runs."""

from __future__ import annotations

import functools
import socket
import threading
from pathlib import Path

from tests.bad_inputs.scenario import Scenario, case, sqlite_copy


def _listen(reply: bytes) -> str:
    """The address of a TCP service on this machine that is not Dask's: it accepts and answers ``reply`` (or
    nothing at all), for the rest of the test session."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def serve() -> None:
        while True:
            conn, _ = server.accept()
            held.append(conn)
            if reply:
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{server.getsockname()[1]}"


@functools.cache
def silent_service() -> str:
    return _listen(b"")


@functools.cache
def web_service() -> str:
    return _listen(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")


@case("parallel")
def scheduler_that_never_answers(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, path, "--scheduler", silent_service()], 2, "does not speak Dask's protocol",
                    None, [path], timeout=60)


@case("parallel")
def scheduler_that_is_a_web_server(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["dataset", "add", tmp / "ds", path, "--scheduler", web_service()], 2,
                    "does not speak Dask's protocol", None, [path], [tmp / "ds"], timeout=60)


@case("parallel")
def scheduler_malformed_ipv6(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--scheduler", "tcp://[::1"], 2, "not an address", None, [path])


@case("parallel")
def scheduler_port_out_of_range(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--scheduler", "tcp://127.0.0.1:99999"], 2, "not an address", None, [path])


@case("parallel")
def workers_beyond_the_machine(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, path, "--workers", "1000"], 2, "--workers 1000: this machine runs at most",
                    None, [path])
