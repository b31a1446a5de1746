"""Write bench/RESULTS.md: the summary (bench/summary.md, kept by hand from the latest run)
followed by every area's detailed figures (bench/results/*.md, written by the scripts)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
ORDER = ["diagnose", "corpus", "verify", "plan", "supervisor", "bench", "engine", "llamacpp_pack"]


def main() -> None:
    pages = {p.stem: p for p in (HERE / "results").glob("*.md")}
    parts = [(HERE / "summary.md").read_text().rstrip() + "\n"]
    for name in ORDER + sorted(set(pages) - set(ORDER)):
        if name in pages:
            text = pages[name].read_text().strip()
            lines = [("#" + line) if line.startswith("#") else line for line in text.splitlines()]
            parts.append("\n".join(lines) + "\n")
    (HERE / "RESULTS.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()
