"""The startup timeline (core.report.timeline): its SVG read back as XML, from events and
from a log, and drawn by a real browser (headless Chromium): a screenshot of the expected
size that is not blank and shows the failure's red mark."""

from __future__ import annotations

import json
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bringup.core.diagnosis import Failure
from bringup.core.live import GpuSample, GpuUse, NodeEvent, PhaseReached, Progress, Ready
from bringup.core.report.recording import Lane, Recording
from bringup.core.report.timeline import draw, rates, size
from bringup.core.vocab import FailureClass, Phase
from run.helpers import cli, fake, free_port, processes_running

from builders.chromium import read_png, screenshot

NS = {"s": "http://www.w3.org/2000/svg"}
GIB = 1024**3
REPO = Path(__file__).resolve().parents[2]


def _lane(name: str, fail: bool, rank: int = 0) -> Lane:
    rec = Recording()
    events = [
        PhaseReached(0.0, Phase.START, 1),
        PhaseReached(3.0, Phase.WEIGHTS_LOADING, 20),
        Progress(3.0, Phase.WEIGHTS_LOADING, 0, 8, "shards"),
        Progress(5.0, Phase.WEIGHTS_LOADING, 4, 8, "shards"),
        Progress(9.0, Phase.WEIGHTS_LOADING, 8, 8, "shards"),
        PhaseReached(9.0, Phase.KV_CACHE_ALLOC, 40),
    ]
    events += [
        GpuSample(t, (GpuUse(0, int(t * 4 * GIB), 80 * GIB), GpuUse(1, int(t * 3 * GIB), 80 * GIB)))
        for t in range(1, 12)
    ]
    if fail:
        from bringup.core.live import FailureFound

        events.append(
            FailureFound(
                12.0,
                Failure(
                    FailureClass.CUDA_OOM,
                    Phase.KV_CACHE_ALLOC,
                    "torch.OutOfMemoryError",
                    57,
                    "out of memory",
                ),
            )
        )
    else:
        events.append(Ready(14.0, 14.0, "m", "http://127.0.0.1:8000"))
    for e in events:
        rec.event(NodeEvent(e, name, rank) if name else e)
    return next(iter(rec.lanes.values()))


def test_the_svg_holds_phases_rate_memory_and_the_failure() -> None:
    lane = _lane("", fail=True)
    assert rates(lane) == [(3.0, 5.0, 2.0, "shards"), (5.0, 9.0, 1.0, "shards")]
    svg = ET.fromstring(draw([lane], "bringup run: failed"))
    assert svg.get("width") == str(size(1).width)
    assert len(svg.findall(".//s:rect[@class='phase']", NS)) == 3
    assert len(svg.findall(".//s:polyline[@class='rate']", NS)) == 1
    assert {p.get("data-gpu") for p in svg.findall(".//s:polyline[@class='gpu']", NS)} == {"0", "1"}
    failure = svg.findall(".//s:line[@class='failure']", NS)
    assert len(failure) == 1
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "cuda_oom at line 57" in texts


def test_one_lane_per_node() -> None:
    lanes = [_lane("gpu-a", fail=False), _lane("gpu-b", fail=True, rank=1)]
    svg = ET.fromstring(draw(lanes, "bringup run --nodes"))
    assert svg.get("height") == str(size(2).height)
    assert [g.get("data-name") for g in svg.findall("s:g[@class='lane']", NS)] == [
        "rank 0 (gpu-a)",
        "rank 1 (gpu-b)",
    ]
    assert len(svg.findall(".//s:line[@class='ready']", NS)) == 1


def test_hostile_names_stay_text() -> None:
    lane = _lane("", fail=True)
    svg = draw([lane], 'a <script>alert("x")</script> & title')
    root = ET.fromstring(svg)  # still well-formed XML
    assert root.find(".//s:script", NS) is None


def test_chromium_draws_the_timeline_of_a_followed_start(tmp_path: Path) -> None:
    """``run --timeline`` of a real child (weights loaded shard by shard, GPU readings that
    move as a writer changes them), drawn by headless Chromium at the picture's size."""
    readings = tmp_path / "gpus.json"
    stop = threading.Event()

    def writer() -> None:
        used = 1
        while not stop.is_set():
            doc = {
                "gpus": [
                    {
                        "index": 0,
                        "name": "H100",
                        "memory_total_bytes": 80 * GIB,
                        "memory_used_bytes": used * GIB,
                    }
                ]
            }
            (tmp_path / "gpus.tmp").write_text(json.dumps(doc))
            (tmp_path / "gpus.tmp").replace(readings)
            used = min(used + 3, 78)
            time.sleep(0.3)

    (tmp_path / "gpus.tmp").write_text(json.dumps({"gpus": []}))
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.1)
    svg_path = tmp_path / "timeline.svg"
    port = free_port()
    try:
        code, _, err = cli(
            ["run", "--timeline", str(svg_path), "--gpus-from", str(readings), "--exit-when-ready",
             "--", *fake("slow", port, "--shards", "6", "--step", "0.4")]
        )  # fmt: skip
    finally:
        stop.set()
        thread.join()
    assert code == 0, err
    assert processes_running(port) == []
    root = ET.fromstring(svg_path.read_text())
    assert root.findall(".//s:line[@class='ready']", NS)
    assert root.findall(".//s:polyline[@class='rate']", NS)
    gpu = root.findall(".//s:polyline[@class='gpu']", NS)
    assert len(gpu) == 1
    assert len((gpu[0].get("points") or "").split()) >= 3  # memory over time
    page = tmp_path / "page.html"  # the SVG on a page with no margin
    page.write_text(
        f'<!DOCTYPE html><html><body style="margin:0">{svg_path.read_text()}</body></html>'
    )
    box = size(1)
    shot = read_png(screenshot(page, tmp_path / "shot.png", box.width, box.height, tmp_path))
    assert (shot.width, shot.height) == (box.width, box.height)
    assert shot.share_not((255, 255, 255)) > 0.03  # bars, lines and words, not a blank page
    assert len(set(shot.pixels)) > 20
    assert shot.count_near((44, 160, 44)) > 50  # the green ready mark
    assert shot.count_near((217, 95, 2)) > 20  # the loading rate's line


def test_chromium_draws_the_report_page_with_its_timeline(tmp_path: Path) -> None:
    """``report --html``: the page with the SVG inside renders, the picture's colours in it."""
    folder = tmp_path / "run-rank0"
    folder.mkdir()
    (folder / "log").write_text(
        (REPO / "tests/fixtures/logs/vllm_0.11_ansi_profile_oom.log").read_text()
    )
    page = tmp_path / "report.html"
    code, _, err = cli(["report", "--html", "-o", str(page), str(folder)])
    assert code == 1, err
    shot = read_png(screenshot(page, tmp_path / "shot.png", 1100, 900, tmp_path))
    assert (shot.width, shot.height) == (1100, 900)
    assert shot.share_not((255, 255, 255)) > 0.03
    assert shot.count_near((214, 39, 40)) > 50


def test_run_nodes_draws_one_lane_per_rank(tmp_path: Path) -> None:
    """The observer ``run --nodes`` is given (wrapped for --timeline) keeps each rank's events
    and draws them in rank order."""
    import argparse

    from bringup.cli.main import Context
    from bringup.cli.report_options import Reporting
    from bringup.core.live import NodesResult
    from bringup.core.verdict import State

    class Seen:
        def __init__(self) -> None:
            self.events: list[object] = []
            self.closed = False

        def event(self, event: object) -> None:
            self.events.append(event)

        def line(self, rank: int, text: str) -> None: ...
        def note(self, text: str) -> None: ...

        def close(self, result: object) -> None:
            self.closed = True

    svg = tmp_path / "nodes.svg"
    args = argparse.Namespace(
        timeline=str(svg),
        metrics_port=None,
        metrics_textfile=None,
        markdown=False,
        markdown_file=None,
    )
    inner = Seen()
    observer = Reporting(args, Context(), "bringup run --nodes").wrap_nodes(inner)
    for rank, node in ((1, "gpu-b"), (0, "gpu-a")):
        observer.event(NodeEvent(PhaseReached(0.5 * rank, Phase.WEIGHTS_LOADING, 3), node, rank))
    observer.event(NodeEvent(Ready(4.0, 4.0, "m", "http://gpu-a:8000"), "gpu-a", 0))
    observer.close(NodesResult(State.READY, 0, None, None, 4.0, {}))
    assert inner.closed
    assert len(inner.events) == 3
    root = ET.fromstring(svg.read_text())
    assert [g.get("data-name") for g in root.findall("s:g[@class='lane']", NS)] == [
        "rank 0 (gpu-a)",
        "rank 1 (gpu-b)",
    ]
