"""The largest websocket messages the app sends and receives, measured on a real server (issue 26:
what `server.maxMessageSize` and `server.maxWidgetStateSize` in .streamlit/config.toml are set
from).

    python benchmarks/bench_messages.py

A client speaking the browser's protocol (tools/streamlit_client.py) opens every page at the
largest inputs the app allows, through links (512 tokens, d_model 1024 with one head — the
largest matrices: X 512 × 1024, W_Q and W_O 1024 × 1024 — or 16 heads; the pretrained
models' 512 tokens), then fills the text boxes a visitor may fill to their limits
(attnviz/app/shared/text.py): Matrix X's box with a 512 × 1024 matrix at 8 characters a number,
then the Inputs page (whose paste box holds that matrix's exact text); the Q, K, V boxes all three
at once, the largest message a browser sends; Generate's prompt full, and 5 tokens generated.
Phase 1 runs the server with both limits raised to 200 MB, so that every message is seen at its
size, and prints, for each case, the largest message the server sent (bytes, and what it
carried) and the message the client sent. Phase 2 starts the server with the shipped config and
checks that the largest legitimate message is accepted (its run finishes) and that a message a
megabyte larger than the limit is refused (the connection closed, code 1009). Phase 3, on that
server (server.disconnectedSessionTTL 2 s): the issue's flood — a 16 MB prompt to Generate,
then four 4 MB prompts from four sessions at once: the server's CPU for each, its RSS before
and once the sessions are gone; then the same again while an observer opens Home once a second
(a fresh session each time), and the observer's time to its first chart. The page's own work for a full prompt box
(a forward pass over 512 tokens) is paid before, by a session sending the box's 8,000
characters, which every prompt of the flood begins with; its CPU is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import tomllib
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attnviz.app.shared.text import MAX_MATRIX_CHARS, MAX_PROMPT_CHARS  # noqa: E402
from tools import streamlit_compat  # noqa: E402
from tools.server import streamlit_server  # noqa: E402
from tools.streamlit_client import (Client, Reply, cpu_seconds, rerun_message,  # noqa: E402
                                    rss_mb, text_state)

WORDS = " ".join(f"w{i}" for i in range(600))                  # cut to 512 tokens
TEXT = ("The animal didn't cross the street because it was too tired, and the river ran on "
        "past the old mill. ") * 40                              # > 512 WordPiece tokens
WIDE = f"sentence={quote(WORDS)}&max_tokens=512&d_model=1024&num_heads=1"
HEADS = f"sentence={quote(WORDS)}&max_tokens=512&d_model=64&num_heads=16"
LONG = f"sentence={quote(TEXT)}&max_tokens=512"
LINKS = [
    ("Home, X 512 × 1024", "home", WIDE),
    ("Home, 16 heads", "home", HEADS),
    ("Inputs, X", "inputs", WIDE + "&matrix=x"),
    ("Inputs, W_Q 1024 × 1024", "inputs", WIDE + "&matrix=w_q"),
    ("Inputs, W_O 1024 × 1024", "inputs", WIDE + "&matrix=w_o"),
    ("Step by step, weights", "steps", WIDE + "&step=weights"),
    ("Step by step, output", "steps", WIDE + "&step=output"),
    ("Multi-head, 16 heads", "multihead", HEADS),
    ("Experiments", "experiments", WIDE),
    ("Pretrained, 512 tokens", "pretrained", LONG),
    ("Read the model, 512 tokens", "reading", LONG),
]


def matrix_text(rows: int = 512, cols: int = 1024) -> str:
    """A rows × cols matrix at 8 characters a number ("0.1234, "): what a matrix box holds."""
    row = ", ".join(f"{(i % 9973) / 9973:.4f}" for i in range(cols))
    text = "\n".join([row] * rows)
    assert len(text) <= MAX_MATRIX_CHARS, len(text)
    return text


def largest(reply) -> tuple[int, str]:
    """The largest message of a reply and what it carried."""
    if not reply.sizes:
        return 0, "-"
    i = max(range(len(reply.sizes)), key=reply.sizes.__getitem__)
    m = reply.messages[i]
    kind = m.WhichOneof("type")
    if kind == "delta" and m.delta.WhichOneof("type") == "new_element":
        kind = m.delta.new_element.WhichOneof("type")
    return reply.sizes[i], kind


def box_ids(reply, kind: str) -> dict[str, str]:
    """The text boxes a run drew: their label → widget id."""
    return {getattr(e, kind).label: getattr(e, kind).id for e in reply.elements(kind)}


async def measure(url: str) -> list[tuple[str, int, str, int]]:
    """(case, largest message sent by the server, what it carried, bytes the client sent)."""
    rows = []
    for name, page, query in LINKS:
        client = Client(url, timeout=600)
        await client.open()
        reply = await client.rerun(page, query=query)
        rows.append((name, *largest(reply), len(rerun_message(page_name=page, query=query))))
        await client.close()

    client = Client(url, timeout=600)                 # Matrix X's box full, then Inputs
    await client.open()
    reply = await client.rerun("home", query="mode=Matrix+X")
    x_box = box_ids(reply, "text_area")["X: one row per token"]
    states = [text_state(x_box, matrix_text())]
    reply = await client.rerun("home", widgets=states)
    rows.append(("Matrix X box full (512 × 1024)", *largest(reply),
                 len(rerun_message(page_hash="", widgets=states))))
    reply = await client.rerun("inputs", widgets=states)
    rows.append(("…then Inputs: its paste box", *largest(reply),
                 len(rerun_message(page_hash="", widgets=states))))
    await client.close()

    client = Client(url, timeout=600)                 # the Q, K, V boxes full at once
    await client.open()
    reply = await client.rerun("home", query="mode=Q%2C+K%2C+V")
    ids = box_ids(reply, "text_area")
    states = [text_state(i, matrix_text()) for label, i in ids.items()
              if label.startswith(("Q:", "K:", "V:"))]
    assert len(states) == 3, ids
    reply = await client.rerun("home", widgets=states)
    rows.append(("Q, K, V boxes full (3 × 512 × 1024)", *largest(reply),
                 len(rerun_message(page_hash="", widgets=states))))
    await client.close()

    client = Client(url, timeout=600)                 # Generate: a full prompt, 5 tokens
    await client.open()
    reply = await client.rerun("generate")
    prompt = text_state(reply.elements("text_area")[0].text_area.id,
                        ("The capital of France is Paris. " * 400)[:MAX_PROMPT_CHARS])
    reply = await client.rerun("generate", widgets=[prompt])
    rows.append(("Generate, prompt full", *largest(reply),
                 len(rerun_message(page_hash="", widgets=[prompt]))))
    many = next(e.button.id for e in reply.elements("button") if e.button.label.startswith(
        "Generate "))
    click = [prompt, streamlit_compat.widget_state(many, trigger_value=True)]
    reply = await client.rerun("generate", widgets=click)
    rows.append(("…and 5 tokens generated", *largest(reply),
                 len(rerun_message(page_hash="", widgets=click))))
    await client.close()
    return rows


async def check_shipped(url: str, limit_mb: int) -> tuple[bool, int | None]:
    """With the shipped config: the Q, K, V boxes full are accepted (the run finishes); a
    prompt a megabyte over the limit closes the connection (its close code)."""
    client = Client(url, timeout=600)
    await client.open()
    reply = await client.rerun("home", query="mode=Q%2C+K%2C+V")
    states = [text_state(i, matrix_text()) for label, i in box_ids(reply, "text_area").items()
              if label.startswith(("Q:", "K:", "V:"))]
    accepted = (await client.rerun("home", widgets=states)).finished
    await client.close()
    client = Client(url, timeout=600)
    await client.open()
    reply = await client.rerun("generate")
    box = reply.elements("text_area")[0].text_area.id
    refused = await client.rerun("generate", widgets=[text_state(box, "x" * (limit_mb + 1)
                                                                  * 10**6)])
    await client.close()
    return accepted, refused.closed


async def send_prompt(url: str, size: int) -> Reply:
    """A session opens Generate, sends a prompt of `size` characters ("x"), and leaves."""
    client = Client(url, timeout=600)
    await client.open()
    reply = await client.rerun("generate")
    box = reply.elements("text_area")[0].text_area.id
    try:
        return await client.rerun("generate", widgets=[text_state(box, "x" * size)])
    finally:
        await client.close()


async def observe(url: str, stop: asyncio.Event) -> list[float]:
    """Home opened once a second by a fresh session: seconds to its first chart."""
    times = []
    while not stop.is_set():
        client = Client(url, timeout=600)
        await client.open()
        start = time.perf_counter()
        await client.ws.send(rerun_message(page_name="", query="sentence=the+cat+sat"))
        reply = Reply()
        while not reply.elements("plotly_chart"):
            reply.messages.append((await client.receive_one())[0])
        times.append(time.perf_counter() - start)
        await client.close()
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
    return times


def settled_rss(pid: int, base: float, wait: float = 40) -> float:
    """The server's RSS once back within 5 MB of `base`, or after `wait` s (the sweeper hands
    pages back every 10 s)."""
    deadline = time.monotonic() + wait
    while rss_mb([pid]) > base + 5 and time.monotonic() < deadline:
        time.sleep(1)
    return rss_mb([pid])


def flood(url: str, pid: int, ttl: float) -> None:
    cpu0 = cpu_seconds([pid])
    asyncio.run(send_prompt(url, MAX_PROMPT_CHARS))
    print(f"the page's work for a full prompt box ({MAX_PROMPT_CHARS:,} characters): "
          f"{cpu_seconds([pid]) - cpu0:.2f} s of server CPU")
    asyncio.run(send_prompt(url, MAX_PROMPT_CHARS))
    time.sleep(ttl + 12)
    for name, size, n in (("a 16 MB prompt", 16 * 10**6, 1),
                          ("four 4 MB prompts at once", 4 * 10**6, 4)):

        async def prompts():
            return await asyncio.gather(*(send_prompt(url, size) for _ in range(n)))

        async def observed():
            stop = asyncio.Event()
            watcher = asyncio.create_task(observe(url, stop))
            await asyncio.sleep(1.5)
            await prompts()
            await asyncio.sleep(1.5)
            stop.set()
            return await watcher

        rss0, cpu0 = rss_mb([pid]), cpu_seconds([pid])
        replies = asyncio.run(prompts())                  # alone: what they cost
        cpu = cpu_seconds([pid]) - cpu0
        said = ", ".join(f"refused (close code {r.closed})" if r.closed else
                         "cut, warned" if any("at most" in x for x in r.texts()) else "ACCEPTED"
                         for r in replies)
        time.sleep(ttl + 1)
        rss = settled_rss(pid, rss0)
        seen = asyncio.run(observed())                    # again, with an observer
        time.sleep(ttl + 1)
        print(f"{name}: {said}; server CPU {cpu:.2f} s; RSS {rss0:.0f} MB before, {rss:.0f} MB "
              f"once the sessions are gone. Again with an observer opening Home: its first "
              f"chart in median {statistics.median(seen):.2f} s, max {max(seen):.2f} s "
              f"({len(seen)} views)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    raised = ("--server.maxMessageSize", "200", "--server.maxWidgetStateSize", "200")
    start = time.monotonic()
    with streamlit_server(300, options=raised) as (url, _):
        rows = asyncio.run(measure(url))
    print(f"{'case':<38} {'largest sent by the server':>27}  {'carrying':<14} "
          f"{'sent by the client':>18}")
    for name, size, kind, sent in rows:
        print(f"{name:<38} {size / 1e6:>24.2f} MB  {kind:<14} {sent / 1e6:>15.2f} MB")
    out = max(rows, key=lambda r: r[1])
    back = max(rows, key=lambda r: r[3])
    print(f"largest message the server sends: {out[1] / 1e6:.2f} MB ({out[0]}, {out[2]})")
    print(f"largest message a client sends:   {back[3] / 1e6:.2f} MB ({back[0]})")
    limit = config["maxMessageSize"]
    print(f"shipped: server.maxMessageSize = {limit} MB, "
          f"server.maxWidgetStateSize = {config['maxWidgetStateSize']} MB")
    ttl = 2
    with streamlit_server(300, options=("--server.disconnectedSessionTTL", str(ttl))) \
            as (url, proc):
        accepted, closed = asyncio.run(check_shipped(url, limit))
        refused = f"refused, close code {closed}" if closed else "NOT REFUSED"
        print(f"with the shipped config: the Q, K, V boxes full "
              f"{'accepted' if accepted else 'REFUSED'}; a prompt of {limit + 1} MB {refused}")
        flood(url, proc.pid, ttl)
    print(f"({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
