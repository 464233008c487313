"""Work done for no one: what a page view costs the server when its browser leaves at once.

    python benchmarks/bench_dropped.py [--sessions 20] [--page multihead]

Starts the app, then measures server CPU seconds (/proc of its process tree) for
  1. one full view of a heavy page (a 400-word text cut at 512 tokens, d_model 256, 8 heads),
     by a session that waits for its end, repeated `--full` times;
  2. `--sessions` sessions that ask for the same kind of view (each its own words) and drop
     their connection as soon as the server has started the run (its first message), as a
     closed tab does; the CPU is counted until the server is idle again.
It prints the CPU of a dropped view as a fraction of a full one. Streamlit (1.67) asks a
session's script to stop when its browser disconnects; the script then stops at its next
Streamlit call, so a dropped view costs what runs until the page's next element, not the
whole page. Measured in one run on a shared machine (other processes' CPU is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import bench_load as bl  # noqa: E402
from tools import streamlit_compat  # noqa: E402

HEAVY = "&max_tokens=512&d_model=256&num_heads=8"


def heavy_session(index: int, registry: bl.Words, url: str) -> bl.Session:
    s = bl.Session(index, registry.take(index) * 50, url, registry, timeout=300)
    s.query += HEAVY
    return s


async def full_view(s: bl.Session, page: str) -> None:
    await s.open(proxy=False)
    try:
        await s.view(page)
    finally:
        await s.close()


async def dropped_view(s: bl.Session, page: str) -> None:
    """Ask for the page, wait for the server's first answer (the run has started), leave."""
    await s.open(proxy=False)
    msg = streamlit_compat.back_msg()
    msg.rerun_script.query_string = s.query
    msg.rerun_script.page_name = page
    await s.ws.send(msg.SerializeToString())
    await asyncio.wait_for(s.ws.recv(), 60)
    await s.ws.close()                              # abruptly: no goodbye beyond the close


def cpu_until_idle(pids: list[int], start: float, quiet: float = 2.0) -> float:
    """CPU seconds since the reading `start`, once the server has used < 5 % of a core for
    `quiet` seconds."""
    last = bl.cpu_seconds(pids)
    while True:
        time.sleep(quiet)
        now = bl.cpu_seconds(pids)
        if now - last < 0.05 * quiet:
            return now - start
        last = now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--full", type=int, default=3)
    parser.add_argument("--page", default="multihead", choices=bl.PAGES)
    args = parser.parse_args()
    registry = bl.Words(per_session=8, seed=0)
    server = bl.Server()
    try:
        bl.warm_up([server.url], registry, timeout=300)
        pids = [server.pid]
        full = []
        for i in range(args.full):
            cpu0 = bl.cpu_seconds(pids)
            asyncio.run(full_view(heavy_session(i, registry, server.url), args.page))
            full.append(cpu_until_idle(pids, cpu0))
        busy0, wall0 = bl.machine_busy_seconds(), time.monotonic()
        cpu0 = bl.cpu_seconds(pids)

        async def drop_all():
            await asyncio.gather(*(dropped_view(heavy_session(100 + i, registry, server.url),
                                                args.page) for i in range(args.sessions)))
        asyncio.run(drop_all())
        dropped = cpu_until_idle(pids, cpu0)
        wall = time.monotonic() - wall0
        others = (bl.machine_busy_seconds() - busy0 - dropped) / wall
    finally:
        server.stop()
    one = statistics.median(full)
    print(f"page /{args.page}, 512 tokens, d_model 256, 8 heads")
    print(f"  one full view: {one:.2f} s of server CPU (median of {args.full}: "
          f"{', '.join(f'{c:.2f}' for c in full)})")
    print(f"  {args.sessions} views dropped at once: {dropped:.2f} s of server CPU in all = "
          f"{dropped / args.sessions:.3f} s each = {dropped / args.sessions / one:.2f} of a "
          f"full view (without stopping: {args.sessions * one:.1f} s)")
    print(f"  other processes on the machine meanwhile: {others:.2f} cores")


if __name__ == "__main__":
    main()
