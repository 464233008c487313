"""What reading SmolLM2's converted cache into memory costs, against memory-mapping it (issue 34).

    python benchmarks/bench_cache_copy.py [--repeats 3] [--threads 1]

A load reads every file of the cache into the process's own memory and checks its CRC-32 on
those bytes (``disk_cache.verify(contents=…)``): a file cut or rewritten in place under a
running server can then neither kill it (SIGBUS) nor change its numbers. Before, the arrays
were memory-mapped (``np.load(mmap_mode="r")``) after the files' checksums were read through a
map: the weights' pages were the page cache's, shared by every process mapping them.

Fresh processes, in turns, --repeats each (the files warm in the page cache): "read" loads as
attnviz does; "mapped" checks the same manifest and checksums, then maps the arrays as before.
Each then runs a 64-token prompt (every weight touched) and prints its load time, VmRSS and
its two parts: RssAnon (the process's own memory) and RssFile (pages of files, the page
cache's: a mapped cache's pages are shared by every process mapping them, so "private" or
Pss figures depend on who else maps them at that moment). Then the medians, their ratios, and
what N replicas of one machine hold: read, N × RssAnon; mapped, N × RssAnon + the cache's
files once. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import header, parse  # noqa: E402

SCRIPT = """
import json, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {root!r} + "/benchmarks")
import numpy as np
from attnviz.models import disk_cache
from attnviz.models.decoders import decoder, gguf_llama
t0 = time.perf_counter()
if {mapped!r}:
    g = decoder.package_file()
    folder = gguf_llama.cache_folder(g)
    config = gguf_llama.read_config(g)
    assert disk_cache.verify(folder, gguf_llama._stamp(g), set(config.files()))
    contents = {{name: bytearray((folder / name).read_bytes()) for name in
                ("config.json", "tokenizer.json")}}
    from tokenizers import Tokenizer
    arrays = {{a: np.load(folder / f"{{a}}.npy", mmap_mode="r") for a in config.shapes()}}
    tok = Tokenizer.from_str(contents["tokenizer.json"].decode("utf-8"))
    m = decoder._model_of(gguf_llama.LlamaFile(config, arrays, tok, g, folder))
else:
    m = decoder.DecoderModel.load()
    assert m.cache_report.outcome == "verified", m.cache_report
load = time.perf_counter() - t0
from bench_decoder import prompt_of
m.run(prompt_of(m, 64))
kb = lambda text, key: int(text.split(key + ":")[1].split()[0])
status = open("/proc/self/status").read()
print(json.dumps({{"load": load, "rss": kb(status, "VmRSS") / 1024,
                  "anon": kb(status, "RssAnon") / 1024, "file": kb(status, "RssFile") / 1024}}))
"""


def fresh(mapped: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(root=str(ROOT), mapped=mapped)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    args = parse(__doc__, repeats=3)
    from attnviz.models.decoders import gguf_llama
    from attnviz.models.decoders.decoder import DecoderModel, package_file

    DecoderModel.load()                                   # the cache made, if it is not yet
    folder = gguf_llama.cache_folder(package_file())
    files_mb = sum(p.stat().st_size for p in folder.iterdir()) / 2 ** 20
    runs = {"read": [], "mapped": []}
    for _ in range(args.repeats):
        runs["read"].append(fresh(False))
        runs["mapped"].append(fresh(True))
    med = {kind: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for kind, rs in runs.items()}
    print(header(args, cache_mb=round(files_mb)))
    for kind, m in med.items():
        print(f"{kind:6}: load {m['load']:.2f} s; after a 64-token run VmRSS {m['rss']:.0f} MB: "
              f"RssAnon {m['anon']:.0f} MB, RssFile {m['file']:.0f} MB; median of "
              f"{args.repeats}")
    r, p = med["read"], med["mapped"]
    print(f"read / mapped: load {r['load'] / p['load']:.2f}x, VmRSS {r['rss'] / p['rss']:.2f}x, "
          f"RssAnon {r['anon'] / p['anon']:.2f}x")
    for n in (1, 2, 4, 8):
        read, mapped = n * r["anon"], n * p["anon"] + files_mb
        print(f"{n} replica(s) on one machine: read {read:,.0f} MB, mapped {mapped:,.0f} MB "
              f"({read / mapped:.2f}x)")

if __name__ == "__main__":
    main()
