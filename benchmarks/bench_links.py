"""What opening a link costs the server (issue 34: a link restores a view and its inputs, never
starts heavy work; budget 1 s of server CPU per opening).

    python benchmarks/bench_links.py

One server (`streamlit run app.py` on a free port), warmed by a visit of Generate and Trace;
then each link below is opened by a fresh session over the browser's websocket protocol (no
browser), and the server's CPU seconds (/proc of its process tree) from the first message
sent to the run's end are printed, with the first visit and a second visitor of the same link:

- Generate with a short prompt and gen_tokens=40 (a link never generates: a press does);
- Generate with an 8,000-character prompt never seen on the server and gen_tokens=40 (its
  next-token bars wait for a press beyond LINK_BARS_TOKENS tokens);
- Trace the answer's patching tab with tr_ran=1 (a result is shown only when computed);
- Trace's information flow at threshold 0 (the walk bounded to the edges drawn).

Measured in one run on a shared 2-core machine: the client and the server share its cores.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_load import Server  # noqa: E402
from tools import streamlit_client  # noqa: E402
from tools.streamlit_client import Client, cpu_seconds  # noqa: E402

BUDGET = 1.0                                   # s of server CPU per opening (issue 34)


def never_seen_prompt(chars: int, seed: int) -> str:
    """Words drawn afresh each run, so no cache of the server has seen the prompt."""
    rng = random.Random(seed)
    words = ["river", "stone", "quiet", "lamp", "orange", "window", "seven", "under", "paper",
             "garden", "slowly", "before", "cloud", "silver", "market", "winter"]
    out = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(words))
    return " ".join(out)[:chars]


LINKS = {
    "generate, short prompt, gen_tokens=40":
        ("generate", {"gen_prompt": "Two plus two is", "gen_tokens": "40"}),
    "generate, 8,000-char new prompt, gen_tokens=40":
        ("generate", {"gen_prompt": never_seen_prompt(8000, random.randrange(10**9)),
                      "gen_tokens": "40"}),
    "trace patching, tr_ran=1":
        ("trace", {"model": "smollm2", "tr_view": "Activation patching", "tr_ran": "1"}),
    "trace flow, threshold 0":
        ("trace", {"model": "smollm2", "tr_view": "Information flow", "fl_threshold": "0"}),
}


async def open_link(url: str, page: str, params: dict) -> bool:
    client = Client(url, timeout=300)
    await client.open()
    try:
        return (await client.rerun(page, query=urlencode(params))).finished
    finally:
        await client.close()


def main() -> None:
    server = Server()
    try:
        for page in ("generate", "trace"):     # imports, the model, the pages' first work
            streamlit_client.run(open_link(server.url, page, {"model": "smollm2"}))
        print(f"{'link':<48} {'first visit':>12} {'second visitor':>15}   (server CPU s; "
              f"budget {BUDGET:.0f} s)")
        worst = 0.0
        for name, (page, params) in LINKS.items():
            spent = []
            for _ in range(2):
                cpu0 = cpu_seconds([server.pid])
                ok = streamlit_client.run(open_link(server.url, page, params))
                spent.append(cpu_seconds([server.pid]) - cpu0)
                if not ok:
                    print(f"  {name}: the run did not finish")
            worst = max(worst, *spent)
            print(f"{name:<48} {spent[0]:>12.2f} {spent[1]:>15.2f}")
        print(f"worst opening: {worst:.2f} s of server CPU ({'within' if worst <= BUDGET else 'OVER'}"
              f" the {BUDGET:.0f} s budget)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
