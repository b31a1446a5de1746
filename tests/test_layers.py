"""The architecture, checked: each layer imports only the layers below it, and no modules
import each other in a circle (lazy imports inside functions count too).

    cli (and __main__)                       the thin command line
    demo                                     the story, told with the follower
    follow | bench_runner                    orchestration: the follower, the bench loop
    render | adapters | twin                 output | I/O seams | the engine twin (independent)
    core                                     pure logic
    errors, units, exit_codes                shared by all

``KNOWN`` lists the imports that still break the rule, each with its reason; it may only
shrink (a test fails when one of them is gone, so the list stays true).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "bringup"
LAYERS: list[set[str]] = [
    {"__main__", "cli"},
    {"demo"},
    {"follow", "bench_runner"},
    {"render", "adapters", "twin"},
    {"core"},
    {"errors", "units", "exit_codes", "__init__"},
]
INDEPENDENT = [{"render", "adapters", "twin"}, {"follow", "bench_runner"}]
# (importer's top-level part, imported top-level part): why it is still there
KNOWN: dict[tuple[str, str], str] = {}
KNOWN_CYCLES: list[set[str]] = []


def modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(("bringup", *path.relative_to(SRC).with_suffix("").parts))
        out[name.removesuffix(".__init__")] = path
    return out


def imports(path: Path) -> set[str]:
    """Every ``bringup`` module named by an import anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bringup"):
            found.update(f"{node.module}.{a.name}" for a in node.names)
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("bringup"))
    return found


def resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in known.items():
        for name in imports(path):
            target = resolve(name, known)
            if target and target != mod and not mod.startswith(target + "."):
                edges[mod].add(target)
    return edges


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def level(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part(module) in layer)


def test_every_top_level_module_has_a_layer():
    """A new top-level module or package must be placed in the layers."""
    assert {part(m) for m in modules()} <= set().union(*LAYERS)


def test_no_module_imports_a_layer_above_it_or_a_sibling():
    """Imports go down the layers; render, adapters and twin never import each other."""
    broken: dict[tuple[str, str], list[str]] = defaultdict(list)
    for mod, targets in graph().items():
        for target in targets:
            a, b = part(mod), part(target)
            up = level(target) < level(mod)
            sideways = a != b and any(a in s and b in s for s in INDEPENDENT)
            if up or sideways:
                broken[(a, b)].append(f"{mod} -> {target}")
    unknown = {k: v for k, v in broken.items() if k not in KNOWN}
    assert unknown == {}
    assert set(broken) == set(KNOWN), "a known exception is gone: drop it from KNOWN"


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """No two modules import each other, directly or round a circle."""
    assert sorted(map(sorted, cycles(graph()))) == sorted(map(sorted, KNOWN_CYCLES))


def test_the_twin_never_reads_the_packs():
    """The engine twin writes vLLM's lines on its own; it never imports bringup's knowledge."""
    assert not {
        t
        for m, ts in graph().items()
        if part(m) == "twin"
        for t in ts
        if part(t) not in ("twin", "units")
    }


def test_the_checker_sees_a_violation():
    """The checker is live: a core module importing the follower would be an upward import."""
    assert level("bringup.core.startup") > level("bringup.follow.loop")
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]
