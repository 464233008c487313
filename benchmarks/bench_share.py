"""What two replicas on one machine hold of Gemma 3 270M, with and without sharing its weights
(issue 37: ATTNVIZ_SHARE_WEIGHTS=1, ``attnviz app --share-weights``), and how fast each decodes.

    python benchmarks/bench_share.py [--repeats 3] [--threads 1] [--new 32]

For each way (shared, then private), two fresh processes one after the other, the first kept
alive while the second starts: each loads ``DecoderModel.load(name="gemma3-270m")`` from the
converted cache (made first if it is not there), runs a 64-token prompt (every weight
touched), then times decoding, --new tokens with the KV cache (generate minus the prompt's
own pass, as benchmarks/bench_gemma3.py, median of --repeats) while the other process waits.
With both alive, each one's Pss (/proc/<pid>/smaps_rollup: its own pages, plus each shared
page divided by the processes mapping it), RssAnon and RssShmem (/proc/<pid>/status) are
printed, and the two Pss summed: what the machine holds for the pair. The memfd's pages are
shmem, and shmem gets no transparent huge pages here (shmem_enabled is printed): hence the
decode rates side by side. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, statistics, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {root!r} + "/benchmarks")
t0 = time.perf_counter()
from attnviz.models.decoders.decoder import DecoderModel
m = DecoderModel.load(name="gemma3-270m")
load = time.perf_counter() - t0
from bench_decoder import prompt_of
text = prompt_of(m, 64)
m.run(text).logits

def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t

made = [timed(lambda: m.generate(text, max_new_tokens={new}, stop_at_eos=False))
        for _ in range({repeats})]
prefill = [timed(lambda: m.next_token_logprobs(text)) for _ in range({repeats})]
per_token = (statistics.median(made) - statistics.median(prefill)) / ({new} - 1)
print(json.dumps({{"load": load, "outcome": m.cache_report.outcome,
                  "tokens_per_s": 1 / per_token}}), flush=True)
sys.stdin.read()
"""


def start(args, share: bool) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "ATTNVIZ_SHARE_WEIGHTS"}
    if share:
        env["ATTNVIZ_SHARE_WEIGHTS"] = "1"
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(args.threads)
    script = SCRIPT.format(root=str(ROOT), new=args.new, repeats=args.repeats)
    return subprocess.Popen([sys.executable, "-c", script], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def ready(p: subprocess.Popen) -> dict:
    line = p.stdout.readline()
    if not line:
        raise SystemExit(f"process {p.pid} ended before it was ready")
    return json.loads(line)


def memory(pid: int) -> dict:
    """The process's Pss (smaps_rollup), RssAnon and RssShmem (status), in MB."""
    found = {}
    for file, keys in (("smaps_rollup", ("Pss",)), ("status", ("RssAnon", "RssShmem"))):
        with open(f"/proc/{pid}/{file}") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in keys:
                    found[key] = int(value.split()[0]) / 1024
    return found


def pair(args, share: bool) -> None:
    """Two processes, the second started while the first lives; their numbers printed."""
    way = "shared " if share else "private"
    first = start(args, share)
    processes, rows = [first], []
    try:
        rows.append(ready(first))
        second = start(args, share)
        processes.append(second)
        rows.append(ready(second))
        pss = 0.0
        for n, (p, row) in enumerate(zip(processes, rows), 1):
            mem = memory(p.pid)
            pss += mem["Pss"]
            print(f"{way} process {n}: Pss {mem['Pss']:7.0f} MB, RssAnon {mem['RssAnon']:7.0f} "
                  f"MB, RssShmem {mem['RssShmem']:7.0f} MB; load {row['load']:.2f} s "
                  f"({row['outcome']}); decode {row['tokens_per_s']:.1f} tokens/s", flush=True)
        print(f"{way} both: Pss {pss:.0f} MB")
    finally:
        for p in processes:
            p.communicate("")
        from attnviz.models import shared_weights
        from attnviz.models.catalogue import builtin
        from attnviz.models.decoders import gguf_llama

        folder = gguf_llama.cache_folder(builtin.gemma3_file())
        for p in processes:                  # the next start would delete them; done here
            shared_weights.registry_file(folder, p.pid).unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new", type=int, default=32)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    shmem = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
    anon = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.2f}; transparent huge "
          f"pages: anonymous {anon.read_text().strip() if anon.exists() else '?'}, shmem "
          f"{shmem.read_text().strip() if shmem.exists() else '?'}", flush=True)
    for share in (True, False):
        pair(args, share)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
