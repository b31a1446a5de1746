"""--hash: streaming sha256 in parallel, cache blob names, sha256sum manifests."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.adapters.hashing import files_to_hash, hash_file, hash_files
from bringup.errors import InputError

from builders.safetensors import shard_name, write_checkpoint, write_hf_cache


def test_hash_file_streams_exactly(tmp_path: Path) -> None:
    """A file hashed in steps hashes to hashlib's sha256 of its bytes, and reports every byte."""
    data = bytes(range(256)) * 1000 + b"tail"
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    seen: list[int] = []
    digest = hash_file(path, buffer_bytes=4096, progress=seen.append)
    assert digest.sha256 == hashlib.sha256(data).hexdigest()
    assert digest.git_sha1 is None
    assert sum(seen) == digest.n_bytes == len(data)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_blob_sha1_matches_git(tmp_path: Path) -> None:
    """The git blob sha1 (the name of small files' cache blobs) equals `git hash-object`."""
    path = tmp_path / "config.json"
    path.write_text('{"architectures": ["X"]}\n')
    expected = subprocess.run(
        ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
    )
    assert hash_file(path, git_sha1=True).git_sha1 == expected.stdout.strip()


def test_parallel_hashing_equals_one_by_one(tmp_path: Path) -> None:
    """Hashing several files on a thread pool gives each file its own digest."""
    write_checkpoint(tmp_path, n_shards=4, fill=True)
    paths = files_to_hash(tmp_path)
    together = hash_files(paths, jobs=4)
    assert together.keys() == paths.keys()
    assert all(together[n] == hash_file(p) for n, p in paths.items())


def test_written_manifest_is_sha256sum_compatible(tmp_path: Path, verify) -> None:
    """--write-manifest writes a file `sha256sum -c` accepts, and --manifest accepts it back."""
    model = write_checkpoint(tmp_path / "m", n_shards=2, fill=True)
    manifest = tmp_path / "SHA256SUMS"
    assert verify(model, "--write-manifest", manifest, "--json").code == 0
    assert len(manifest.read_text().splitlines()) == len(files_to_hash(model))
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--quiet", "-c", str(manifest)], cwd=model, check=True)
    assert verify(model, "--manifest", manifest, "--json").code == 0


def test_manifest_mismatch_and_missing_file(tmp_path: Path, verify) -> None:
    """A changed file is hash_mismatch against the manifest; a listed file that is gone is missing_shard."""
    model = write_checkpoint(tmp_path / "m", n_shards=2, fill=True)
    manifest = tmp_path / "SHA256SUMS"
    verify(model, "--write-manifest", manifest)
    (model / "tokenizer_config.json").write_text('{"model_max_length": 8192}')
    (model / "tokenizer.json").unlink()
    result = verify(model, "--manifest", manifest, "--json")
    assert result.code == 1
    assert sorted(result.kinds()) == [
        ("config_missing", "tokenizer.json"),
        ("hash_mismatch", "tokenizer_config.json"),
        ("missing_shard", "tokenizer.json"),
    ]
    assert "the manifest says" in result.problem("hash_mismatch")["detail"]


def test_small_cache_files_checked_by_git_sha1(tmp_path: Path, verify) -> None:
    """In a cache, a small file whose bytes no longer match its git-sha1 blob name is hash_mismatch."""
    write_checkpoint(tmp_path / "m", n_shards=2)
    repo = write_hf_cache(tmp_path / "hub", "org/m", tmp_path / "m")
    blob = (repo / "snapshots" / ("0" * 40) / "tokenizer.json").resolve()
    blob.write_text('{"version": "2.0"}')
    result = verify(repo, "--hash", "--json")
    assert result.kinds() == [("hash_mismatch", "tokenizer.json")]
    assert result.problem("hash_mismatch")["detail"].startswith("git-sha1 is ")


def test_cache_hash_passes_and_counts_compared_files(tmp_path: Path, verify) -> None:
    """An intact cache snapshot passes --hash and every file was compared with its blob name."""
    write_checkpoint(tmp_path / "m", n_shards=3, fill=True)
    repo = write_hf_cache(tmp_path / "hub", "org/m", tmp_path / "m")
    result = verify(repo, "--hash")
    assert result.code == 0, result.out
    assert "sha256 of 7 files" in result.out
    assert "7 compared with a published digest" in result.out


def test_bad_manifest_is_exit_2(tmp_path: Path, verify) -> None:
    """A manifest line that is not `<sha256>  <file>` is a one-line error, exit 2."""
    model = write_checkpoint(tmp_path / "m", n_shards=2)
    (tmp_path / "bad").write_text(f"nothex  {shard_name(1, 2)}\n")
    result = verify(model, "--manifest", tmp_path / "bad")
    assert result.code == 2
    assert result.err.startswith("bringup: error: ")
    assert "line 1" in result.err
    assert result.err.count("\n") == 1


def test_first_failure_in_order_is_raised_and_no_new_file_starts(tmp_path: Path) -> None:
    """With several workers, the error of the first failing file (in the caller's order) is
    raised, and files not started yet are not hashed after it."""
    ok = tmp_path / "a.bin"
    ok.write_bytes(b"a" * 10_000)
    started: list[int] = []
    paths = {"a": ok, "gone": tmp_path / "gone.bin"}
    paths |= {f"later{i}": ok for i in range(50)}
    with pytest.raises(InputError, match="no such file"):
        hash_files(paths, jobs=2, progress=started.append)
    assert sum(started) < 52 * 10_000  # the 50 later files were not all hashed


def test_verify_hash_start_up_imports_only_what_it_uses(tmp_path: Path) -> None:
    """`verify FILE --hash` into a pipe imports neither rich, ssh, GGUF nor the thread-pool
    machinery (concurrent.futures pulls in logging): start-up is on the hashing path."""
    write_checkpoint(tmp_path, n_shards=1, fill=True)
    code = (
        "import sys, io\n"
        "from bringup.cli.main import Context, main\n"
        f"rc = main(['verify', {str(tmp_path)!r}, '--hash'], Context(stdout=io.StringIO(), environ={{}}))\n"
        "heavy = ['rich', 'bringup.adapters.ssh', 'bringup.adapters.ssh_forward', "
        "'bringup.adapters.gguf_file', 'concurrent.futures', 'logging', 'subprocess']\n"
        "print(rc, [m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "3 []"  # nothing to compare with here: exit 3


def _big(tmp_path: Path, mib: int) -> tuple[Path, bytes]:
    data = hashlib.sha256(b"seed").digest() * (mib * 32768)
    path = tmp_path / "big.safetensors"
    path.write_bytes(data)
    return path, data


def test_mapped_and_read_paths_give_the_same_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file hashed from its mapping, and one that cannot be mapped (read into a buffer),
    give hashlib's digests of its bytes, every byte reported once."""
    import mmap

    from bringup.adapters import hashing

    path, data = _big(tmp_path, 40)
    seen: list[int] = []
    mapped = hash_file(path, git_sha1=True, progress=seen.append)
    assert mapped.sha256 == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data)
    assert max(seen) == hashing.MAP_STEP  # it went through the mapping, step by step

    def refuse(*_a: object, **_k: object) -> None:
        raise OSError("no mmap on this file system")

    monkeypatch.setattr(mmap, "mmap", refuse)
    seen.clear()
    read = hash_file(path, git_sha1=True, progress=seen.append)
    assert read == mapped
    assert max(seen) == hashing.BUFFER_BYTES


def test_a_file_that_shrinks_while_mapped_is_refused_not_a_crash(tmp_path: Path) -> None:
    """Truncated while hashed (a page past its new end would be SIGBUS): one clear error."""
    path, _ = _big(tmp_path, 40)

    def truncate(_n: int) -> None:
        with path.open("r+b") as f:
            f.truncate(1 << 20)

    with pytest.raises(InputError, match="changed while it was hashed"):
        hash_file(path, progress=truncate)


def test_a_file_that_grows_while_hashed_is_refused(tmp_path: Path) -> None:
    """Bytes written while it is hashed are not read, and the file is named as changing."""
    path, _ = _big(tmp_path, 20)

    def grow(_n: int) -> None:
        with path.open("ab") as f:
            f.write(b"x" * 1024)

    with pytest.raises(InputError, match="changed while it was hashed"):
        hash_file(path, progress=grow)


def test_empty_file_hashes(tmp_path: Path) -> None:
    """An empty file (nothing to map) has the empty input's digest."""
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert hash_file(path).sha256 == hashlib.sha256(b"").hexdigest()
