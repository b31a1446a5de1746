"""``bringup demo``: the motivating story end to end with the engine twin, no GPU needed.

Exit codes: 0 the story went as it should (plan predicted the OOM, the run caught it while the
server was alive, the recommended setting reached ready and the model answered); 1 otherwise.
"""

from __future__ import annotations

import argparse

from bringup.cli.main import Context
from bringup.core.story import Story
from bringup.demo import tell
from bringup.errors import UsageError
from bringup.render.demo import format_attempt, format_plan, format_summary, story_json
from bringup.render.json_out import write_line
from bringup.render.live import make_observer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--time-scale",
        metavar="FACTOR",
        type=float,
        default=0.05,
        help="the twin's pace: 0.05 replays a ~5-minute vLLM startup in ~15 s (default)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines of the runs' events, then one summary object",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also echo the engine's own log lines"
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.passthrough is not None:
        raise UsageError("demo takes no server command", hint="run `bringup demo` on its own")
    if not 0.001 <= args.time_scale <= 1.0:
        raise UsageError(f"--time-scale {args.time_scale} is out of range", hint="use 0.001 to 1.0")
    human = ctx.stderr if args.json else ctx.stdout

    def say(text: str) -> None:
        human.write(text + "\n")
        human.flush()

    def observer_for(_n: int) -> object:
        return make_observer(
            ctx.stdout,
            ctx.stderr,
            ctx.environ,
            as_json=args.json,
            quiet=not args.verbose,
            title="bringup run (engine twin)",
        )

    environ = dict(ctx.environ)
    story = tell(say=say, observer_for=observer_for, environ=environ, time_scale=args.time_scale)
    for line in _narration(story):
        say(line)
    if args.json:
        write_line(story_json(story), ctx.stdout)
    return 0 if story.told else 1


def _narration(story: Story) -> list[str]:
    lines: list[str] = ["", "what bringup saw:", "1/4  plan"]
    if story.plan is not None:
        lines += format_plan(story.plan)
    for n in range(1, len(story.attempts) + 1):
        lines.append(f"{n + 1}/4  run {n}")
        lines += format_attempt(story, n)
    lines += format_summary(story)
    return lines
