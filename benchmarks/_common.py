"""What the model benchmarks share: the command line (--threads, --repeats) with BLAS set to
that many threads before numpy is imported, and the machine's load in the header line.

    args = parse(__doc__, repeats=5)      # first, before numpy or attnviz are imported
    ids = text_ids(model, 64)             # the long-text benchmarks' 64 tokens
    print(header(args, tokens=64))
"""

from __future__ import annotations

import argparse
import os


def parse(description: str | None = None, *, repeats: int = 3) -> argparse.Namespace:
    """The arguments: --threads (default 1; 0 leaves the libraries' own setting) and --repeats
    (default `repeats`). OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set here, so call it
    before numpy is imported."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=repeats)
    args = parser.parse_args()
    if args.threads:
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    return args


TEXT = ("The Eiffel Tower is in the city of Paris, and the Colosseum is in the city of "
        "Rome. ") * 8


def text_ids(model, n: int):
    """The first `n` token ids of TEXT (n ≤ 185) as `model` reads it."""
    return model.encode(TEXT)[:n]


def header(args: argparse.Namespace, **facts) -> str:
    """One line: the facts given, the threads, and the load average (the machine is shared)."""
    said = ", ".join(f"{name} {value}" for name, value in facts.items())
    return (f"{said + ', ' if said else ''}threads {args.threads}, "
            f"load average {os.getloadavg()[0]:.2f}")
