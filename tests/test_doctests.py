"""The examples in bringup's docstrings run and give what they show (pytest collects only
tests/, so without this a docstring's example could go stale unseen)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import bringup


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(bringup.__path__, "bringup."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        if doctest.DocTestFinder().find(module) and any(
            t.examples for t in doctest.DocTestFinder().find(module)
        ):
            names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_there_are_examples_to_run() -> None:
    assert len(MODULES) >= 5, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
