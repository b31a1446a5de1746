"""The startup follower: one loop from a source of log lines to a verdict.

- ``types``: ``StartupConfig``, ``StartupResult`` and the interfaces of the dependencies.
- ``loop``: ``run_startup(config, *, source, prober, gpus, clock, notify)``, every dependency
  passed in.
- ``samplers``: the inbox, and the lanes that run the blocking reads (probes, GPU memory).
- ``wiring``: the real dependencies (``follow_local``).
- ``retry_loop``: the one ``--retry`` loop; what differs per kind of start is its ``Attempts``.
- ``retry``: ``--retry`` for a child (``ChildAttempts``) or a systemd unit (``UnitAttempts``).
- ``nodes_retry``: ``run --nodes --retry`` (``NodeAttempts``), every node started again.
"""
