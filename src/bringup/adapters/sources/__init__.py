"""Where a followed server's log lines and its end come from: one source per module.

A source delivers ``LineItem`` values as lines arrive and one ``ExitItem`` when the server
ends, through an ``emit`` callback that the follower's inbox provides (thread-safe).

- ``child.ChildSource``: a server bringup starts (``bringup run``); the only source that may signal.
- ``file.FileSource``: ``--log FILE``, followed like ``tail -F`` (renames and truncation).
- ``pid.PidSource``: ``--pid PID``, liveness through psutil; no log lines.
- ``unit.UnitSource``: ``--unit NAME``: ``systemctl show`` and ``journalctl -u NAME -o json -f``
  of the current invocation, resumed after a reconnect with ``--after-cursor``.
- ``container.ContainerSource``: ``--container NAME``: ``docker inspect`` and ``docker logs -f``.
- ``remote_file.RemoteFileSource``: ``--log FILE --host H``: ``tail -F`` over ssh, by byte offset.

The items and the ``Source`` protocol are in ``items``; the reader-command restarts shared by
the unit, container and remote-file sources in ``reader``. The watch sources never signal the
server; ``stop`` only ends bringup's own readers.
"""
