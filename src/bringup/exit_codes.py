"""bringup's exit codes, and the exit statuses that mean a process was killed."""

from __future__ import annotations

EXIT_READY = 0  # ready (run, watch, up, status, diagnose), or stopped on request after ready
EXIT_FAILED = 1  # a root cause, a death, a hang
EXIT_USAGE = 2  # bad input or a source that cannot be followed: one line on stderr
EXIT_INCOMPLETE = 3  # no verdict: diagnose of a log that ends mid-startup; status: starting or
# unknown; verify --hash with nothing to compare with; bench: the server cannot be asked
EXIT_STALLED = 4  # run, watch, up: no progress for --stall, or past --deadline
EXIT_GPUS_HELD = 5  # guard: timed out with the GPUs still held
EXIT_INTERNAL = 70  # a bug: an exception nothing else caught (BRINGUP_DEBUG=1 shows it)
SIGNAL_BASE = 128  # 128+N: interrupted by signal N before a verdict
SIGINT = 2  # Ctrl-C, when no other signal is known
SIGPIPE = 13  # the reader of stdout went away (`bringup ... | head`)

# A server's status when it was killed with SIGKILL (usually the kernel's OOM killer):
# -9 as Popen reports it, 137 (128+9) as a shell or container runtime does.
KILLED_EXIT_CODES = frozenset({-9, 137})
