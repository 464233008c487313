"""Decoder model (SmolLM2-135M-Instruct) budgets: ready time, memory, run, generation.

    python benchmarks/bench_decoder.py [--repeats 5] [--new-tokens 32] [--skip-convert]
                                       [--threads N] [--ready-only] [--finite-checks]

Prints, each measured in this one run:
- ready time in a fresh process (interpreter start, ``import attnviz``, ``DecoderModel.load()``
  and a first ``run``): with no converted copy on disk (the GGUF read and dequantised, then
  cached), cold (the cached copy on disk but its pages, and the GGUF's, evicted from the page
  cache with posix_fadvise DONTNEED) and warm (the files in the page cache). Budgets: cold
  ≤ 10 s, warm ≤ 2 s. Every load verifies the cache (its manifest, each file's size and CRC-32,
  the arrays' shapes, config.json against the GGUF's metadata): warm, median of --repeats
  fresh processes, beside a bare load of the same files (read and shaped, no manifest, no
  checksums) in fresh processes interleaved with them; and the checksum's own time over the
  cache's files, CRC-32 (used) against SHA-256, in this process.
- resident memory of that fresh process after a 64-token run and a 32-token generation (VmRSS,
  and the peak VmHWM). Budget ≤ 700 MB.
- ``run`` of a 64-token prompt (every layer traced, all attentions, all logits) against
  transformers' eager forward with ``output_attentions=True`` on the same ids, interleaved in
  this process, median of --repeats. Budgets ≤ 1 s and ratio ≤ 1.0.
- greedy generation of --new-tokens tokens after that 64-token prompt with the KV cache against
  transformers' ``generate`` (greedy, the same number of tokens, its own KV cache), interleaved,
  median. Budgets ≥ 10 new tokens/s and ratio ≤ 1.2.
and the load average, since the machine is shared. --finite-checks measures only what the
finite checks (issue 26: one per layer, and one on the logits) cost: ``run`` of the 64-token
prompt and the generation with the checks as shipped and with them replaced by a check that
passes at once, interleaved in this process, median of --repeats, and their ratios. --threads N gives numpy's BLAS and torch
N threads each (0: each library's default, one per core). On this shared 2-core machine two
threads spin-wait for each other while other processes hold the cores, so the same-process
ratios are fairest with --threads 1. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

READY_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import attnviz
{load}
t1 = time.perf_counter()
m.run("Hello world")
t2 = time.perf_counter()
sys.path.insert(0, {root!r} + "/benchmarks")
from bench_decoder import prompt_of
prompt = prompt_of(m, 64)
m.run(prompt)
m.generate(prompt, max_new_tokens=32, stop_at_eos=False)
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
mb = lambda key: int(status[key].split()[0]) / 1024
print(json.dumps({{"load": t1 - t0, "ready": t2 - t0, "rss_mb": mb("VmRSS"),
                  "peak_mb": mb("VmHWM"), "cached_in": str(m.cached_in),
                  "outcome": m.cache_report.outcome, "verify": m.cache_report.verify_seconds}}))
"""
LOAD = "m = attnviz.DecoderModel.load()"
# the same files read and shaped as a load does, without the manifest and its checksums
BARE_LOAD = """from attnviz.models.decoders import decoder, gguf_llama
g = decoder.package_file()
folder = gguf_llama.cache_folder(g)
config = gguf_llama.read_config(g)
contents = {name: bytearray((folder / name).read_bytes()) for name in config.files()}
m = decoder._model_of(gguf_llama._from_contents(contents, folder, g, config))"""


def prompt_of(model, n: int) -> str:
    """A text of exactly n tokens."""
    words = ("The animal didn't cross the street because it was too tired, and the river "
             "kept singing about seven old lanterns near the quiet garden gate.").split()
    text, i = "", 0
    while len(model.encode(text or "x")) < n or not text:
        text = (text + " " + words[i % len(words)]).strip()
        i += 1
    while len(model.encode(text)) > n:
        text = text[:-1]
    assert len(model.encode(text)) == n, len(model.encode(text))
    return text


def evict(paths) -> None:
    """Drop these files' pages from the page cache (only theirs: other processes' files stay)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fresh_process(cache_dir: str | None = None, load: str = LOAD) -> dict:
    env = dict(os.environ)
    if cache_dir is not None:
        env["ATTNVIZ_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, "-c", READY_SCRIPT.format(root=str(ROOT), load=load)],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def checksum_seconds(files, algorithm: str) -> float:
    """Seconds to hash every file (through a memory map, as the cache's check reads them)."""
    import hashlib
    import mmap
    import zlib

    t0 = time.perf_counter()
    for path in files:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            zlib.crc32(m) if algorithm == "crc32" else hashlib.sha256(m).digest()
    return time.perf_counter() - t0


def verification(repeats: int) -> None:
    """Warm ready time with the cache verified against a bare load, fresh processes in turns;
    then CRC-32 against SHA-256 over the same files."""
    from attnviz.models.decoders import gguf_llama
    from attnviz.models.decoders.decoder import package_file

    runs = {"verified": [], "bare": []}
    for _ in range(repeats):
        runs["verified"].append(fresh_process())
        runs["bare"].append(fresh_process(load=BARE_LOAD))
    assert {r["outcome"] for r in runs["verified"]} == {"verified"}
    med = {name: {key: statistics.median(r[key] for r in rs) for key in ("load", "ready")}
           for name, rs in runs.items()}
    check = statistics.median(r["verify"] for r in runs["verified"])
    print(f"ready warm, the cache verified: {med['verified']['ready']:.2f} s (load "
          f"{med['verified']['load']:.2f} s, of which the check {check:.2f} s); bare, no "
          f"manifest or checksums: {med['bare']['ready']:.2f} s (load "
          f"{med['bare']['load']:.2f} s); median of {repeats} each (budget 2 s)")
    files = sorted(p for p in gguf_llama.cache_folder(package_file()).iterdir()
                   if p.stat().st_size)
    size = sum(p.stat().st_size for p in files) / 1e6
    times = {a: statistics.median(checksum_seconds(files, a) for _ in range(3))
             for a in ("crc32", "sha256")}
    print(f"checksum of the cache's {size:.0f} MB, warm, median of 3: CRC-32 "
          f"{times['crc32']:.2f} s (used), SHA-256 {times['sha256']:.2f} s")


def interleaved(fns: dict, repeats: int) -> dict:
    """Median seconds of each function, run in turns (a, b, a, b, …) after one warm-up each."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def finite_checks(repeats: int, new_tokens: int) -> None:
    """The finite checks' cost: run and generate with them and without, interleaved."""
    from attnviz.models.decoders import decoder as decoder_module
    from attnviz.models.decoders.decoder import DecoderModel

    model = DecoderModel.load()
    prompt = prompt_of(model, 64)
    checked = decoder_module.all_finite

    def without(compute):
        def timed():
            decoder_module.all_finite = lambda a: True
            try:
                compute()
            finally:
                decoder_module.all_finite = checked
        return timed

    def run():
        model.run(prompt)

    def generate():
        g = model.generate(prompt, max_new_tokens=new_tokens, stop_at_eos=False)
        assert len(g.steps) == new_tokens

    def inside(compute) -> float:
        """Seconds spent inside the checks during one call of `compute` (timed one by one)."""
        spent = [0.0]

        def timed_check(a):
            t0 = time.perf_counter()
            ok = checked(a)
            spent[0] += time.perf_counter() - t0
            return ok

        decoder_module.all_finite = timed_check
        try:
            compute()
        finally:
            decoder_module.all_finite = checked
        return spent[0]

    print(f"time inside the checks: run {inside(run) * 1e3:.2f} ms, generate "
          f"{inside(generate) * 1e3:.2f} ms")
    # each pair timed in both orders (on this shared machine the first of a pair is often
    # a few % slower or faster: an A/A pair alone differs by ~1.5 %)
    for name, compute in (("run, 64 tokens", run),
                          (f"generate {new_tokens} tokens after 64", generate)):
        ratios = []
        for order in (("checked", "unchecked"), ("unchecked", "checked")):
            fns = {"checked": compute, "unchecked": without(compute)}
            t = interleaved({k: fns[k] for k in order}, repeats)
            ratios.append(t["checked"] / t["unchecked"])
            print(f"{name} ({order[0]} first): with the finite checks {t['checked']:.4f} s, "
                  f"without {t['unchecked']:.4f} s, ratio {ratios[-1]:.3f}")
        print(f"{name}: ratio with / without, both orders' mean {sum(ratios) / 2:.3f}")
    print(f"load average after: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--skip-convert", action="store_true",
                        help="do not time a conversion with no cached copy")
    parser.add_argument("--ready-only", action="store_true",
                        help="only the ready times, memory and the cache's check")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS and torch threads (0: the libraries' defaults)")
    parser.add_argument("--finite-checks", action="store_true",
                        help="only the cost of the finite checks: with them and without")
    args = parser.parse_args()
    if args.threads:                     # before numpy loads OpenBLAS (fresh processes inherit)
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print(f"load average before: {os.getloadavg()}")
    if args.finite_checks:
        finite_checks(args.repeats, args.new_tokens)
        return

    from attnviz.models.decoders import gguf_llama
    from attnviz.models.decoders.decoder import DecoderModel, package_file

    if not args.skip_convert:
        with tempfile.TemporaryDirectory() as empty:
            r = fresh_process(empty)
            print(f"ready with no cached copy (convert + cache): {r['ready']:.2f} s "
                  f"(load {r['load']:.2f} s)")
    fresh_process()                      # makes sure the default cache holds a copy
    # this process has not mapped the files, so their pages can be dropped
    cached = gguf_llama.cache_folder(package_file())
    evict([package_file()] + sorted(cached.iterdir()))
    cold = fresh_process()
    warm = fresh_process()
    print(f"ready cold (cached copy on disk, evicted from the page cache): {cold['ready']:.2f} s "
          f"(budget 10 s); warm: {warm['ready']:.2f} s (budget 2 s)")
    verification(args.repeats)
    model = DecoderModel.load()
    prompt = prompt_of(model, 64)
    print(f"resident after a 64-token run and a {32}-token generation: {warm['rss_mb']:.0f} MB, "
          f"peak {warm['peak_mb']:.0f} MB (budget 700 MB); cache {warm['cached_in']}")
    if args.ready_only:
        print(f"load average after: {os.getloadavg()}")
        return

    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM
    from attnviz.models.decoders.decoder import GGUF_NAME
    hf = AutoModelForCausalLM.from_pretrained(package_file().parent, gguf_file=GGUF_NAME,
                                              attn_implementation="eager",
                                              dtype=torch.float32).eval()
    ids = model.encode(prompt)
    batch = torch.tensor([ids.tolist()])
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"threads: torch {torch.get_num_threads()}, numpy's BLAS "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, cores {os.cpu_count()}")

    def hf_forward():
        with torch.no_grad():
            hf(batch, output_attentions=True)

    t = interleaved({"attnviz": lambda: model.run(prompt), "transformers": hf_forward},
                    args.repeats)
    print(f"run, 64 tokens, all attentions: attnviz {t['attnviz']:.3f} s, transformers eager "
          f"{t['transformers']:.3f} s, ratio {t['attnviz'] / t['transformers']:.2f} "
          f"(budgets 1 s, ≤ 1.0)")

    n = args.new_tokens

    def hf_generate():
        with torch.no_grad():
            out = hf.generate(batch, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        assert out.shape[1] == len(ids) + n

    def ours():
        g = model.generate(prompt, max_new_tokens=n, stop_at_eos=False)
        assert len(g.steps) == n

    t = interleaved({"attnviz": ours, "transformers": hf_generate}, args.repeats)
    print(f"generate {n} tokens after 64: attnviz {t['attnviz']:.2f} s "
          f"({n / t['attnviz']:.1f} new tokens/s), transformers {t['transformers']:.2f} s "
          f"({n / t['transformers']:.1f}/s), ratio {t['attnviz'] / t['transformers']:.2f} "
          f"(budgets ≥ 10 tokens/s, ≤ 1.2)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
