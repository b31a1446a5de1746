"""Real-engine test setup: the llama.cpp server (llama-cpp-python[server]) and a tiny model.

Tests marked ``engine`` skip with a clear message when ``llama_cpp.server`` cannot be
imported, but FAIL instead when ``BRINGUP_REQUIRE_REAL=1`` (CI sets it after installing the
engine with scripts/install-engine.sh), so a broken install can never pass silently.
Every server a test starts is killed at the end, and the test fails if any is left.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.real_engine import Server, engine_processes

from builders.gguf import write_tiny_llama_gguf

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "logs" / "llamacpp_real"
INSTALL_HINT = "install it with scripts/install-engine.sh (llama-cpp-python[server] 0.3.36)"


def _engine_problem() -> str | None:
    """Why the real engine cannot run here, or None when it can."""
    try:
        import llama_cpp.server  # noqa: F401
    except Exception as exc:  # ImportError, or a broken native library (OSError)
        return f"llama_cpp.server cannot be imported ({type(exc).__name__}: {exc})"
    return None


ENGINE_PROBLEM = _engine_problem()


@pytest.fixture(autouse=True)
def _require_engine(request: pytest.FixtureRequest) -> None:
    """Skip engine tests without the engine; fail them when BRINGUP_REQUIRE_REAL=1."""
    if request.node.get_closest_marker("engine") is None or ENGINE_PROBLEM is None:
        return
    if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
        pytest.fail(f"BRINGUP_REQUIRE_REAL=1 but {ENGINE_PROBLEM}; {INSTALL_HINT}")
    pytest.skip(f"real engine absent: {ENGINE_PROBLEM}; {INSTALL_HINT}")


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny GGUF plus a truncated copy, a header-truncated copy and a corrupt-magic copy."""
    root = tmp_path_factory.mktemp("models")
    tiny = root / "tiny.gguf"
    write_tiny_llama_gguf(tiny)
    data = tiny.read_bytes()
    (root / "truncated.gguf").write_bytes(data[:200_000])
    (root / "truncated_header.gguf").write_bytes(data[:2_000])
    (root / "corrupt.gguf").write_bytes(b"GGXF" + data[4:])
    return {p.stem: p for p in root.glob("*.gguf")}


@pytest.fixture
def no_leftovers(models: dict[str, Path]) -> Iterator[str]:
    """Yield the models folder (a marker in every server command line); fail if a server is left."""
    marker = str(models["tiny"].parent)
    yield marker
    left = engine_processes(marker)
    for p in left:
        p.kill()
    assert not left, f"servers left running: {[p.pid for p in left]}"


@pytest.fixture
def start_server(tmp_path: Path, no_leftovers: str) -> Iterator[object]:
    """Start real servers directly; every one is stopped when the test ends (before the leftover check)."""
    started: list[Server] = []

    def start(argv: list[str], name: str = "server") -> Server:
        s = Server(argv, tmp_path / f"{name}-{len(started)}.log")
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
