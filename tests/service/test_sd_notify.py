"""sd_notify against real AF_UNIX datagram sockets given as NOTIFY_SOCKET."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator

import pytest

from bringup.adapters.sd_notify import Notifier, encode, parse


@pytest.fixture
def receiver() -> Iterator[tuple[socket.socket, str]]:
    """A bound datagram socket in a short temp dir (AF_UNIX paths are limited to 108 bytes)."""
    folder = tempfile.mkdtemp(prefix="sdn", dir="/tmp")
    path = os.path.join(folder, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    yield sock, path
    sock.close()
    shutil.rmtree(folder)


def received(sock: socket.socket) -> dict[str, str]:
    return parse(sock.recv(4096))


def test_messages_arrive_on_the_socket(receiver: tuple[socket.socket, str]) -> None:
    """Each call sends one datagram with the protocol's field names."""
    sock, path = receiver
    n = Notifier({"NOTIFY_SOCKET": path})
    assert n.enabled
    assert n.send(READY=1, STATUS="ready")
    assert sock.recv(4096) == b"READY=1\nSTATUS=ready"
    assert n.status("weights_loading 45/125")
    assert received(sock) == {"STATUS": "weights_loading 45/125"}
    assert n.extend_timeout(90.5)
    assert received(sock) == {"EXTEND_TIMEOUT_USEC": "90500000"}
    assert n.ready("ready: the model answered")
    assert received(sock) == {"READY": "1", "STATUS": "ready: the model answered"}
    assert n.ready()
    assert received(sock) == {"READY": "1"}
    assert n.watchdog()
    assert received(sock) == {"WATCHDOG": "1"}
    assert n.stopping()
    assert received(sock) == {"STOPPING": "1"}


def test_abstract_socket_with_at_prefix() -> None:
    """NOTIFY_SOCKET=@name reaches the abstract socket \\0name."""
    name = f"bringup-test-{os.getpid()}-{id(object())}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(10)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).status("starting")
        assert received(sock) == {"STATUS": "starting"}


def test_unset_socket_is_a_silent_no_op() -> None:
    """Without NOTIFY_SOCKET nothing is sent and nothing raises."""
    n = Notifier({})
    assert not n.enabled
    assert n.ready("x") is False
    assert n.watchdog_interval_seconds() is None


def test_dead_socket_path_does_not_raise(tmp_path: object) -> None:
    """A socket path nobody listens on makes send return False, and raise only in debug."""
    folder = tempfile.mkdtemp(prefix="sdn", dir="/tmp")
    try:
        dead = os.path.join(folder, "gone.sock")
        assert Notifier({"NOTIFY_SOCKET": dead}).ready() is False
        with pytest.raises(OSError):
            Notifier({"NOTIFY_SOCKET": dead}, debug=True).ready()
    finally:
        shutil.rmtree(folder)


def test_newlines_in_values_cannot_inject_fields() -> None:
    """A status with a newline stays one field."""
    assert parse(encode({"STATUS": "a\nREADY=1"})) == {"STATUS": "a READY=1"}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_is_half_of_watchdog_usec(
    environ: dict[str, str], expected: float | None
) -> None:
    """The watchdog is fed at half its period, and only by the process it names."""
    assert Notifier(environ).watchdog_interval_seconds() == expected


def test_a_reader_that_never_reads_does_not_freeze_the_sender() -> None:
    """With the notify queue full, status updates are dropped at once and READY=1 waits only briefly."""
    folder = tempfile.mkdtemp(prefix="sdn", dir="/tmp")
    path = os.path.join(folder, "full.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        notifier = Notifier({"NOTIFY_SOCKET": path})
        results = [notifier.status(f"loading weights {i}/500 " + "x" * 2000) for i in range(500)]
        assert results[0] is True
        assert False in results
        assert notifier.ready("ready") is False  # still full: given up after a short wait
    shutil.rmtree(folder)
