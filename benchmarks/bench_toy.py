"""attnviz.toy (attnviz.models.trainer.toy): time to accuracy for the issue's two budgets; with
--corners, the Train page's extreme sizes (each learns its task, or the page's verdict says
why not), and the page's time estimate against the measured time.

    python benchmarks/bench_toy.py [--seeds 3] [--reruns 10]
    python benchmarks/bench_toy.py --corners [--tasks reverse,induction]

Each run starts a clock just before ``attnviz.models.trainer.toy.train`` and notes, from ``on_step``
(about 50 held-out evaluations per run), when held-out accuracy first reaches the target; it then
prints that time, the whole run's time with its default steps, and the final accuracy. One warm-up
run first pays torch's one-off imports (about 2 s: torch.optim loads torch._dynamo).

Then the app while a model trains (the Train page trains in a thread of the server process):
the server-side time of AppTest reruns of the Multi-head page, idle and with induction
training in a background thread of the same process (budget: ≤ 0.5 s).

Budgets (issue 12), on this 2-core machine:
  reverse   (the defaults: length 8, vocab 10, 1 layer, 2 heads)   ≥ 0.95 within 20 s
  induction (2 layers, the other defaults)                          ≥ 0.90 within 60 s

``toy.train`` trains on one torch thread by itself (the model's matrices are tiny, and on a
loaded machine a second thread mostly waits for the first) and gives the caller's setting back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from attnviz.models.trainer import toy, toy_plan  # noqa: E402

BUDGETS = [("reverse", {}, 0.95, 20.0), ("induction", {"layers": 2}, 0.90, 60.0)]


def time_to_accuracy(task: str, options: dict, target: float, seed: int) -> dict:
    reached = {}
    start = time.perf_counter()

    def on_step(step, loss, accuracy):
        if accuracy >= target and not reached:
            reached.update(step=step, seconds=time.perf_counter() - start)

    run = toy.train(task, seed=seed, on_step=on_step, **options)
    return dict(reached, total=time.perf_counter() - start, steps=run.steps,
                final=run.mean_accuracy)


def rerun_times(at, reruns: int) -> list[float]:
    times = []
    for _ in range(reruns):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    return times


def reruns_while_training(reruns: int) -> None:
    """Multi-head page reruns (12 tokens, 4 heads) idle, then while induction trains."""
    from tools.apptest import open_page

    at = open_page("pages/multihead.py")
    idle = rerun_times(at, reruns)
    stop = threading.Event()
    worker = threading.Thread(target=lambda: toy.train(
        "induction", layers=2, steps=toy.MAX_STEPS, on_step=lambda *_: not stop.is_set()))
    worker.start()
    time.sleep(1.0)                                            # training is under way
    busy = rerun_times(at, reruns)
    stop.set()
    worker.join()
    for name, times in (("idle", idle), ("while training", busy)):
        print(f"Multi-head page rerun {name:14}: median {statistics.median(times):.3f} s, "
              f"max {max(times):.3f} s over {len(times)}")
    verdict = "within" if max(busy) <= 0.5 else "OVER"
    print(f"rerun while training: {verdict} the 0.5 s budget")


# The Train page's ranges: length 3–16, vocabulary 2–50, layers 1–4, heads 1–8, d_model 4–128.
CORNERS = {
    "smallest": dict(length=3, vocab=2, layers=1, heads=1, d_model=4),
    "defaults": dict(),
    "d_model 4, vocab 50, length 16": dict(length=16, vocab=50, layers=1, heads=1, d_model=4),
    "8 heads of d_model 8, vocab 50": dict(length=16, vocab=50, layers=1, heads=8, d_model=8),
    "4 layers, 8 heads, d_model 16": dict(length=16, vocab=50, layers=4, heads=8, d_model=16),
    "length 16, vocab 2": dict(length=16, vocab=2, layers=1, heads=2, d_model=32),
    "largest": dict(length=16, vocab=50, layers=4, heads=8, d_model=128),
}


def corners(tasks: list[str]) -> None:
    """Each task at the page's corners with its default steps: final accuracy, the page's
    verdict, and the page's estimate (made before training) against the time taken."""
    ratios = []
    for task in tasks:
        for name, sizes in CORNERS.items():
            sizes = dict(sizes)
            if task == "induction":
                sizes["layers"] = max(2, sizes.get("layers", 1))
            cfg = toy.make_config(task, **sizes)
            estimate = toy_plan.RATE.estimate(cfg)
            start = time.perf_counter()
            run = toy.train_config(cfg)
            took = time.perf_counter() - start
            ratios.append(took / estimate)
            v = toy_plan.verdict(cfg, run.history, run.mean_accuracy)
            print(f"{task:9} {name:32} {run.mean_accuracy:6.1%}  {took:6.1f} s (estimated "
                  f"{estimate:5.1f} s)  {v.text}", flush=True)
    print(f"time taken / estimate: median {statistics.median(ratios):.2f}, range "
          f"{min(ratios):.2f}–{max(ratios):.2f} over {len(ratios)} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="runs per task (seeds 0, 1, …)")
    parser.add_argument("--reruns", type=int, default=10,
                        help="page reruns timed idle and while training (0: skip)")
    parser.add_argument("--corners", action="store_true",
                        help="the Train page's extreme sizes for every task, then stop")
    parser.add_argument("--tasks", default=",".join(toy.TASKS),
                        help="with --corners: the tasks")
    args = parser.parse_args()
    if args.corners:
        import os

        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        corners(args.tasks.split(","))
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    print(f"torch {torch.__version__}")
    toy.train("shift", steps=5)                                # warm up: imports, first calls
    for task, options, target, budget in BUDGETS:
        results = [time_to_accuracy(task, options, target, seed) for seed in range(args.seeds)]
        for seed, r in enumerate(results):
            when = (f"{r['seconds']:5.2f} s (step {r['step']})" if "seconds" in r
                    else "never")
            print(f"{task:9} {options or 'defaults'} seed {seed}: accuracy ≥ {target} after "
                  f"{when}; all {r['steps']} steps {r['total']:5.2f} s, final "
                  f"{r['final']:.3f}")
        worst = max(r.get("seconds", float("inf")) for r in results)
        median = statistics.median(r.get("seconds", float("inf")) for r in results)
        verdict = "within" if worst <= budget else "OVER"
        print(f"{task:9} time to ≥ {target}: median {median:.2f} s, worst {worst:.2f} s — "
              f"{verdict} the {budget:.0f} s budget")
    if args.reruns:
        reruns_while_training(args.reruns)


if __name__ == "__main__":
    main()
