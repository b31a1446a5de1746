"""``bringup verify PATH``: prove a checkpoint is complete and intact before an engine reads it.

Exit codes: 0 no problems, 1 problems found, 2 usage error or unreadable input, 3 no problems
but ``--hash`` had nothing to compare with (no published digest, no ``--manifest``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

from bringup import exit_codes
from bringup.adapters import files, hashing
from bringup.adapters.checkpoint import scan_checkpoint
from bringup.cli.main import Context
from bringup.core.checkpoint import (
    Checkpoint,
    Digest,
    Expected,
    Problem,
    build_report,
    check_hashes,
    repo_id_of,
    with_download_commands,
)
from bringup.errors import UsageError
from bringup.render import verify as render


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bringup verify``."""
    parser.add_argument(
        "path",
        metavar="PATH",
        help="model folder, HF cache folder (models--org--name) or snapshot, "
        ".safetensors file, or .gguf file (part 1 of a split one)",
    )
    parser.add_argument(
        "--hash",
        action="store_true",
        help="also sha256 every file (streaming, in parallel) and compare with the "
        "HF cache blob names or --manifest",
    )
    parser.add_argument(
        "--manifest", metavar="FILE", help="sha256sum-format file to compare with (implies --hash)"
    )
    parser.add_argument(
        "--write-manifest",
        metavar="FILE",
        help="write the sha256 of every file, sha256sum format (implies --hash)",
    )
    parser.add_argument(
        "--jobs", type=int, metavar="N", help="files hashed at once (default: one per CPU)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Scan headers, optionally hash, report; 0 when clean, 1 when problems were found."""
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}", hint="e.g. --jobs 4")
    manifest = hashing.read_manifest(Path(args.manifest)) if args.manifest else None
    checkpoint = scan_checkpoint(args.path)
    extra: list[Problem] = []
    stats = None
    if args.hash or manifest is not None or args.write_manifest:
        extra, stats = _hash(checkpoint, manifest, args, ctx)
    report = build_report(checkpoint, extra)
    report = dataclasses.replace(report, problems=_with_commands(report.problems, checkpoint, ctx))
    if args.json:
        from bringup.render.json_out import print_json

        print_json(report, ctx.stdout)
        if stats is not None and stats.compared == 0:
            ctx.stderr.write(f"bringup: {render.NOTHING_COMPARED}\n")
    else:
        render.print_report(ctx.stdout, ctx.environ, report, checkpoint.root, stats)
    if not report.ok:
        return exit_codes.EXIT_FAILED
    unchecked = stats is not None and stats.compared == 0 and not args.write_manifest
    return exit_codes.EXIT_INCOMPLETE if unchecked else exit_codes.EXIT_READY


def _with_commands(
    problems: tuple[Problem, ...], checkpoint: Checkpoint, ctx: Context
) -> tuple[Problem, ...]:
    """ "Fetch X again" as the exact `hf download` command when the cache names the repo."""
    found = repo_id_of(checkpoint.root)
    if found is None:
        return problems
    repo, hub = found
    home = ctx.environ.get("HF_HOME") or os.path.join(
        ctx.environ.get("HOME", "~"), ".cache/huggingface"
    )
    default = ctx.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    same = os.path.realpath(os.path.expanduser(default)) == os.path.realpath(hub)
    return with_download_commands(problems, repo, None if same else hub)


def _hash(
    checkpoint: Checkpoint,
    manifest: dict[str, Expected] | None,
    args: argparse.Namespace,
    ctx: Context,
) -> tuple[list[Problem], render.HashStats]:
    paths = _targets(checkpoint)
    expected = hashing.cache_expectations(_folder(checkpoint), paths)
    expected.update(manifest or {})
    sha1 = [name for name, e in expected.items() if e.algorithm == "git-sha1"]
    total = sum(files.check_path(p).st_size for p in paths.values())
    started = time.monotonic()
    with render.hash_progress(ctx.stderr, ctx.environ, total, enabled=not args.json) as advance:
        digests = hashing.hash_files(paths, git_sha1=sha1, jobs=args.jobs, progress=advance)
    seconds = time.monotonic() - started
    if args.write_manifest:
        hashing.write_manifest(Path(args.write_manifest), digests)
    stats = render.HashStats(
        len(digests), _bytes(digests), seconds, len(expected.keys() & digests.keys())
    )
    return check_hashes(expected, digests), stats


def _targets(checkpoint: Checkpoint) -> dict[str, Path]:
    root = Path(checkpoint.root)
    if checkpoint.format == "gguf":
        return {name: root.parent / name for name in checkpoint.files}
    return hashing.files_to_hash(root)


def _folder(checkpoint: Checkpoint) -> Path:
    root = Path(checkpoint.root)
    return root.parent if checkpoint.format == "gguf" or root.suffix == ".safetensors" else root


def _bytes(digests: dict[str, Digest]) -> int:
    return sum(d.n_bytes for d in digests.values())
