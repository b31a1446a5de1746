"""bringup: from weights on disk to verified serving.

The library surface is small on purpose; the command line (``bringup --help``) is the
main interface. Import the layers directly:

- ``bringup.core``: pure logic (phases, knowledge packs, diagnosis, planning, readiness).
- ``bringup.adapters``: the I/O seams (processes, HTTP, GPUs, files, systemd, SSH).
- ``bringup.follow``: the one loop that follows a startup (``run_startup``), and ``--retry``.
- ``bringup.render``: human and JSON output.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
