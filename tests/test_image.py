"""The class image, built and run here (issue 30): the Dockerfile built with buildah on a
Debian bookworm base made here (tests/image_helpers.py says how), then

- one container with no network but its loopback: the image's HEALTHCHECK passes within its
  start period; every page serves over Streamlit's websocket (the client runs inside the
  container), SmolLM2 and MiniLM included, so both load offline; the server runs as the
  unprivileged user, who can write nothing of the model cache, and the cache is used as it is
  (no reconversion: the first SmolLM2 page takes less than three quarters of a conversion
  longer than a later one);
- two containers on 127.0.0.1 behind Debian's haproxy with the shipped deploy/haproxy.cfg (its
  server lines for these two ports, as benchmarks/bench_load.py makes them): what
  tests/test_deploy.py checks against plain processes (the security headers, the metrics
  block in every spelling, sessions that stay on their replica through a reconnect), uploads
  and downloads in Chromium reaching the replica that holds the session, and one replica
  killed mid-session: its learners land on the other with a new session of their own link,
  the other's sessions keep theirs.

Marked `deploy`. Needs podman, buildah, debootstrap and runc (.ci/run installs them); under
CI=true a missing one fails instead of skipping. The image is built once and used again: it is
tagged by the digest of the files and settings it is made from (tests/image_helpers.py;
tests/test_image_digest.py), kept in podman's store, and built only when that tag is missing,
with buildah's layer cache (a change to the app alone: seconds; from nothing but the base:
about 5 minutes here, 13 at a load average of 15–22; the base 2 more). The whole file: about
4 minutes with the image there. ATTNVIZ_TEST_IMAGE=<tag> runs the tests on another image built
before (not under CI=true).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from attnviz.i18n import t
from tests import image_helpers as ih
from tests.browser_helpers import first_heatmap, wait_for_app
from tests.deploy_helpers import assert_metrics_blocked, assert_security_headers, haproxy
from tests.stream_client import CHARTS, TITLES
from tools import streamlit_compat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_load  # noqa: E402

pytestmark = pytest.mark.deploy

SMOLLM2 = "pretrained?model=smollm2"          # the Pretrained page with the decoder chosen
SMOLLM2_AGAIN = SMOLLM2 + "&sentence=Another+text+for+the+decoder+to+read"   # a new run
APP_PORT = 8501                                # the image's own, inside its network namespace


def say(request, line: str) -> None:
    """A line in pytest's output (CI's log) whatever the capture: the build's and the
    replicas' times."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[test_image] {line}")


@pytest.fixture(scope="module")
def image(request, tmp_path_factory):
    missing = ih.missing_tools()
    if missing:
        message = (f"{', '.join(missing)} not installed: apt-get install -y podman buildah "
                   "debootstrap runc")
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {message} (.ci/run installs them)")
        pytest.skip(message)
    given = os.environ.get("ATTNVIZ_TEST_IMAGE")
    if given and not os.environ.get("CI"):      # an image built before, to work on the tests
        yield given
        return
    log = tmp_path_factory.mktemp("image") / "build.log"
    with ih.image_in_use(log) as (tag, seconds):
        size = int(ih.run(["podman", "image", "inspect", "--format", "{{.Size}}", tag]).stdout)
        done = (f"built {tag} in {seconds['image']:.0f} s" if seconds["image"] else
                f"{tag} was there (built before from the same files): used again")
        say(request, f"{done} (the base: {seconds['base']:.0f} s, 0 when cached); "
                     f"{size / 1e9:.2f} GB; log {log}")
        yield tag


def image_config(tag: str) -> dict:
    return json.loads(ih.run(["podman", "image", "inspect", "--format", "{{json .Config}}",
                              tag]).stdout)


def run_once(tag: str, *command: str, options: list[str] = ()) -> str:
    """`command` in a fresh container of `tag` with no network; its output."""
    return ih.run([*ih.RUN, "--rm", "--network", "none", *options, tag, *command],
                  timeout=600).stdout


# ---- the image itself ------------------------------------------------------------------------

def test_the_image_holds_torchs_cpu_build_and_nothing_of_the_build_machine(image):
    out = run_once(image, "python", "-c", (
        "import json, torch, importlib.metadata as m; print(json.dumps([torch.__version__, "
        "sorted(d.metadata['Name'] for d in m.distributions() "
        "if d.metadata['Name'].lower().startswith(('nvidia', 'triton')))]))"))
    version, cuda = json.loads(out.splitlines()[-1])
    assert (version, cuda) == ("2.13.0+cpu", [])
    config = image_config(image)
    assert config["User"] == "10001"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert not {"PIP_CONFIG_FILE", "TORCH_INDEX_URL"} & set(env)    # build arguments only
    # what the build mounted left nothing behind: /mnt (the pip.conf, the CA) is empty, and
    # so is what stands where this machine's package folders were mounted
    folders = " ".join(str(p) for p in ih.pip_folders(ih.pip_options()))
    listing = run_once(image, "sh", "-c", f"find /mnt {folders} -mindepth 1 2>/dev/null; "
                       "find / -xdev -name pip.conf", options=["--user", "0"])
    assert listing.strip() == ""


@pytest.fixture(scope="module")
def conversion_seconds(image) -> float:
    """Seconds to convert SmolLM2's GGUF in this image with an empty cache folder: what each
    replica would spend at its first SmolLM2 page if it could not use the image's cache."""
    out = run_once(image, "python", "-c", (
        "import time; from attnviz.models.decoders.decoder import DecoderModel; "
        "t = time.perf_counter(); m = DecoderModel.load(); "
        "print(time.perf_counter() - t, m.num_layers)"),
        options=["-e", "ATTNVIZ_CACHE_DIR=/tmp/empty-cache"])
    seconds, layers = out.split()[-2:]
    assert layers == "30"
    return float(seconds)


# ---- one container, no network but its loopback ----------------------------------------------

CACHE_STATE = r"""
import json, os
root = os.environ["ATTNVIZ_CACHE_DIR"]
entries, writable, created = {}, [], []
for folder, dirs, files in os.walk(root):
    for name in [folder, *(os.path.join(folder, f) for f in files)]:
        st = os.stat(name)
        entries[os.path.relpath(name, root)] = [st.st_size, st.st_mtime_ns, st.st_mode]
        if os.access(name, os.W_OK):
            writable.append(name)
    try:
        open(os.path.join(folder, "attnviz-write-test"), "x").close()
        created.append(folder)
    except PermissionError:
        pass
print(json.dumps({"uid": os.getuid(), "entries": entries, "writable": writable,
                  "created": created}))
"""


def cache_state(container: ih.Container) -> dict:
    out = container.exec("python", "-c", CACHE_STATE).stdout
    return json.loads(out.splitlines()[-1])


@pytest.fixture(scope="module")
def offline(request, image, conversion_seconds):
    """One container of the image with `--network none`, started as the image says; every
    page opened inside it. Yields what was seen."""
    container = ih.Container(image, f"attnviz-test-offline-{os.getpid()}", ["--network", "none"])
    try:
        health = json.loads(ih.run(["podman", "image", "inspect", "--format",
                                    "{{json .HealthCheck}}", image]).stdout)
        start_period = health["StartPeriod"] / 1e9
        while not container.healthy():
            assert time.monotonic() - container.started < start_period + 30, container.logs()
            time.sleep(0.5)
        healthy = time.monotonic() - container.started
        before = cache_state(container)
        url = f"http://127.0.0.1:{APP_PORT}"
        pages = ["steps", SMOLLM2, *[p for p in TITLES if p != "steps"], SMOLLM2_AGAIN,
                 "reading?model=smollm2"]
        seen = {v["page"]: v for v in ih.stream_client(container, url, pages)}
        after = cache_state(container)
        owned = container.exec("sh", "-c", "find / -xdev -user 10001 -type f -printf '%s %p\\n'",
                               user="0", check=False).stdout
        say(request, f"offline replica: healthy {healthy:.1f} s after `podman run`; first page "
                     f"(steps) first chart {seen['steps']['first_chart']:.1f} s after it was "
                     f"asked for; first SmolLM2 page {seen[SMOLLM2]['finished']:.1f} s, a later "
                     f"one on a new text {seen[SMOLLM2_AGAIN]['finished']:.1f} s (converting "
                     f"SmolLM2 alone: {conversion_seconds:.1f} s)")
        yield {"container": container, "healthy": healthy, "start_period": start_period,
               "seen": seen, "before": before, "after": after, "owned": owned,
               "interfaces": container.exec("cat", "/proc/net/dev").stdout,
               "hpids": container.host_pids()}
    finally:
        container.remove()


def test_the_health_check_passes_within_the_start_period(offline):
    assert offline["healthy"] < offline["start_period"], offline["healthy"]


def test_every_page_serves_with_no_network_but_the_loopback(offline):
    interfaces = re.findall(r"^\s*(\w+):", offline["interfaces"], re.M)
    assert interfaces == ["lo"]
    for page, title in {**TITLES, SMOLLM2: TITLES["pretrained"],
                        SMOLLM2_AGAIN: TITLES["pretrained"],
                        "reading?model=smollm2": TITLES["reading"]}.items():
        seen = offline["seen"][page]
        assert not seen["exceptions"], (page, seen["exceptions"])
        assert title in seen["titles"], (page, seen["titles"])
        assert page.split("?")[0] not in CHARTS or "plotly_chart" in seen["types"], \
            (page, seen["types"])
        assert seen["script"] == "/app/app.py"
        if page.startswith("pretrained"):            # the model the link chose, loaded
            model = "SmolLM2-135M-Instruct" if "smollm2" in page else "all-MiniLM-L6-v2"
            assert any(model in text for text in seen["texts"]), (page, seen["texts"][:3])
        assert seen["config"] == {"gather_usage_stats": False,
                                  "toolbar_mode": streamlit_compat.toolbar_mode("MINIMAL")}


def test_the_server_runs_unprivileged_and_cannot_write_the_model_cache(offline):
    for hpid in offline["hpids"]:
        status = Path(f"/proc/{hpid}/status").read_text()
        uids = re.search(r"^Uid:\s+(.*)$", status, re.M).group(1).split()
        assert set(uids) == {"10001"}, (hpid, uids)
    before = offline["before"]
    assert before["uid"] == 10001 and len(before["entries"]) > 1
    assert before["writable"] == [] and before["created"] == []


def test_the_image_s_model_cache_is_used_not_converted_again(offline, conversion_seconds):
    """No file of the cache changed, the user wrote no model anywhere (all its files add up to
    less than 1 MB; a converted SmolLM2 is hundreds), and the first SmolLM2 page took less
    than three quarters of a conversion more than a later one on a new text (which runs the
    model too, loaded by then): its extra is the cache's load (and any check of it), not a
    conversion, measured in the same image and run."""
    assert offline["after"]["entries"] == offline["before"]["entries"]
    owned = sum(int(line.split(" ", 1)[0]) for line in offline["owned"].splitlines() if line)
    assert owned < 1_000_000, offline["owned"]
    first, later = offline["seen"][SMOLLM2], offline["seen"][SMOLLM2_AGAIN]
    assert "plotly_chart" in first["types"] and "plotly_chart" in later["types"]
    extra = first["finished"] - later["finished"]
    assert extra < 0.75 * conversion_seconds, (first["finished"], later["finished"],
                                               conversion_seconds)


def test_the_image_s_tuned_lens_is_read_not_fitted_again(offline):
    """Fitted while the image was built (a minute of generating and fitting): the server's
    user, who cannot write the cache, reads it whole, checked, in seconds."""
    out = offline["container"].exec("python", "-c", (
        "import time; from attnviz import DecoderModel; m = DecoderModel.load(); "
        "t = time.perf_counter(); found = m.tuned_lens(); "
        "print(found.outcome, found.tokens, time.perf_counter() - t)")).stdout
    outcome, tokens, seconds = out.split()[-3:]
    assert outcome == "verified" and int(tokens) > 1000, out
    assert float(seconds) < 10, out


# ---- two replicas behind the shipped haproxy.cfg ----------------------------------------------

def in_thread(fn, *args, **kw):
    """`fn(*args, **kw)` in a thread of its own (its own asyncio loop: Playwright's sync API
    holds one in this thread once a browser test has run); its result or its exception."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn(*args, **kw)
        except BaseException as exc:                        # noqa: BLE001 - re-raised below
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


class Loop:
    """An asyncio loop in a thread of its own: bench_load's sessions keep their websockets open
    across the test's plain (and Playwright's) calls."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 600):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def cluster(request, image):
    """Two containers of the image on the host's network, each told its own port on 127.0.0.1
    (STREAMLIT_SERVER_ADDRESS / _PORT), behind haproxy with deploy/haproxy.cfg (server lines
    r1, r2 for these ports) naming the replica in each response (``image_helpers.replicas``)."""
    haproxy()
    with ih.replicas(image, 2, f"attnviz-test-{os.getpid()}-r") as (containers, ports, urls,
                                                                   proxy):
        registry = bench_load.Words(8, seed=30)
        t0 = time.monotonic()
        in_thread(bench_load.warm_up, urls, registry, timeout=300)   # every page once on each
        say(request, f"two replicas warmed up (every page once) in "
                     f"{time.monotonic() - t0:.0f} s")
        yield {"containers": containers, "ports": ports, "urls": urls, "proxy": proxy,
               "registry": registry, "names": ["r1", "r2"]}


def test_the_headers_and_the_metrics_block_through_the_proxy(cluster):
    proxy = cluster["proxy"]
    status, headers, _ = _get(proxy.url + "/")
    assert status == 200
    assert_security_headers(headers)
    assert headers[bench_load.REPLICA_HEADER] in cluster["names"]
    assert_metrics_blocked(proxy.port, cluster["ports"])


def _get(url: str):
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.headers, r.read()


def test_sessions_stay_on_their_replica_through_a_reconnect(cluster):
    """bench_load's sessions through the proxy: each opens its link, visits four pages and
    drops its connection half way; every response from one replica, the same Streamlit
    session after the reconnect, its own sentence on every page and nobody else's, and each
    replica's own counters agree."""
    urls, names, registry = cluster["urls"], cluster["names"], cluster["registry"]
    before = [bench_load.session_events(u) for u in urls]
    results = in_thread(asyncio.run, bench_load.run_sessions(
        cluster["proxy"].url, registry, 0, 6, views=4, interval=0, ramp=2, proxy=True,
        reconnect=True, timeout=240))
    after = [bench_load.session_events(u) for u in urls]
    foreign, lost, errors = bench_load.correctness(results)
    assert (foreign, lost, errors) == (0, 0, 0), [r.errors for r in results]
    placed = {name: 0 for name in names}
    for r in results:
        assert len(set(r.replicas)) == 1 and r.replicas[0] in names, r.replicas
        assert len(r.session_ids) == 2 and len(set(r.session_ids)) == 1, r.session_ids
        placed[r.replicas[0]] += 1
    assert all(placed.values()), placed                  # both replicas took sessions
    for name, b, a in zip(names, before, after):
        assert a.get("connect", 0) - b.get("connect", 0) == placed[name], name
        assert a.get("reconnect", 0) - b.get("reconnect", 0) == placed[name], name


def _replica_log(context) -> list[tuple[str, str]]:
    """(path, replica) of every response the browser context gets from the proxy."""
    seen: list[tuple[str, str]] = []
    context.on("response", lambda r: seen.append(
        (r.url.split("//", 1)[1].split("/", 1)[1].split("?")[0],
         r.headers.get(bench_load.REPLICA_HEADER.lower(), ""))))
    return seen


@pytest.mark.browser
def test_uploads_and_downloads_reach_the_replica_that_holds_the_session(cluster, browser,
                                                                         tmp_path):
    """Two learners in Chromium, one on each replica (the proxy's leastconn while both tabs
    are open): each uploads a matrix for X (the file goes by HTTP to /_stcore/upload_file/)
    and downloads the .npz of its trace (by HTTP from /media/): every response from the
    replica the page came from, the upload shown, the download holding it."""
    url = cluster["proxy"].url
    learners = []
    for k in range(2):
        context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                      accept_downloads=True)
        page = context.new_page()
        learners.append((context, page, _replica_log(context)))
        page.goto(f"{url}/inputs?d_model=8&seed={k + 1}")
        wait_for_app(page)
    try:
        replicas = set()
        for k, (context, page, seen) in enumerate(learners):
            home = seen[0][1]
            replicas.add(home)
            label = page.get_by_text(re.compile(r"Paste or upload X \(\d+×\d+\)")).first
            rows, cols = map(int, re.search(r"\((\d+)×(\d+)\)", label.inner_text()).groups())
            label.click()
            x = np.round(np.random.default_rng(k).standard_normal((rows, cols)), 4)
            csv = tmp_path / f"x{k}.csv"
            csv.write_text("\n".join(",".join(str(v) for v in row) for row in x))
            uploader = page.locator('[data-testid="stFileUploader"]').filter(
                has_text=t("edit.paste.upload"))
            uploader.locator('input[type="file"]').set_input_files(str(csv))
            page.wait_for_function(
                "() => document.querySelectorAll('[data-testid=\"stStatusWidget\"]').length "
                "=== 0", timeout=60_000)
            deadline = time.monotonic() + 60
            while not np.allclose(np.array(first_heatmap(page)["z"]), x, atol=1e-6):
                assert time.monotonic() < deadline, "the uploaded X is not shown"
                page.wait_for_timeout(500)
            page.get_by_role("link", name=t("nav.steps"), exact=True).click()
            page.get_by_role("heading", name=t("steps.title")).first.wait_for(timeout=60_000)
            wait_for_app(page)
            page.get_by_text(t("downloads.label")).click()
            with page.expect_download(timeout=60_000) as download:
                page.get_by_role("button", name="NumPy .npz").click()
            npz = tmp_path / f"trace{k}.npz"
            download.value.save_as(npz)
            with np.load(npz, allow_pickle=False) as saved:
                np.testing.assert_allclose(saved["x"], x, atol=1e-6)
            uploads = [r for p, r in seen if p.startswith("_stcore/upload_file/")]
            assert uploads, seen
            assert {r for _, r in seen} == {home}, seen   # every response, one replica
            # Chromium hands a download to its download manager, and the page's response
            # event for it comes late or not at all; so the file's /media/ URL is asked
            # again with this tab's cookies (the proxy's affinity cookie among them): only
            # the replica that holds the session has it
            url_path = download.value.url.split("//", 1)[1].split("/", 1)[1]
            assert url_path.startswith("media/"), download.value.url
            again = context.request.get(download.value.url)
            assert again.ok, again.status
            assert again.headers[bench_load.REPLICA_HEADER.lower()] == home
            assert again.body() == npz.read_bytes()
            other = cluster["urls"][1 - cluster["names"].index(home)]
            assert context.request.get(f"{other}/{url_path}").status == 404
        assert replicas == set(cluster["names"]), replicas
    finally:
        for context, _, _ in learners:
            context.close()


@pytest.mark.browser
def test_a_killed_replicas_learners_land_on_the_other(cluster, browser):
    """Runs last (it kills r1 or r2). A learner in Chromium and six bench_load sessions, spread
    over both replicas, each mid-session (its websocket open). The tab's replica is killed:
    the tab reconnects by itself and shows its own sentence again, served by the other
    replica; each protocol session of the dead replica reconnects as a browser does (its old
    session id, then its page and link) and gets a new session there, with its own sentence;
    the other replica's sessions keep their sessions (the same ids after a reconnect) and
    their sentences."""
    proxy, names, registry = cluster["proxy"], cluster["names"], cluster["registry"]
    words = registry.take(1000)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    seen = _replica_log(context)
    page = context.new_page()
    page.goto(f"{proxy.url}/steps?sentence={'+'.join(words)}")
    wait_for_app(page)
    victim = seen[0][1]
    survivor = next(n for n in names if n != victim)
    sentence = page.get_by_role("textbox", name="Sentence")
    assert sentence.input_value() == " ".join(words)
    sessions = [bench_load.Session(2000 + k, registry.take(2000 + k), proxy.url, registry, 240)
                for k in range(6)]
    loop = Loop()
    try:

        async def start():
            for s in sessions:
                await s.open(proxy=True)
                s.result.views.append(await s.view("steps"))

        loop.run(start())
        home = {s.index: s.result.replicas[0] for s in sessions}
        assert set(home.values()) == set(names), home      # some on each replica
        cluster["containers"][names.index(victim)].kill()

        async def come_back(s: bench_load.Session, deadline: float):
            old = s.result.session_ids[-1]
            if home[s.index] == survivor:                   # still connected: a page, then
                s.result.views.append(await s.view("multihead"))     # a reconnect
            await s.close()
            while True:
                try:
                    await s.open(proxy=True)
                    s.pages = {}          # the page reruns with its own link, as a browser does
                    s.result.views.append(await s.view("multihead"))
                    return old
                except Exception:                           # noqa: BLE001 - until it lands
                    await s.close()
                    assert time.monotonic() < deadline, s.result.errors
                    await asyncio.sleep(1)

        async def all_back():
            deadline = time.monotonic() + 90
            return await asyncio.gather(*(come_back(s, deadline) for s in sessions))

        old_ids = loop.run(all_back())
        for s, old in zip(sessions, old_ids):
            assert s.result.replicas[-1] == survivor, (s.index, s.result.replicas)
            assert all(v.own and not v.foreign for v in s.result.views), s.index
            if home[s.index] == survivor:
                assert s.result.session_ids[-1] == old, "the survivor lost a session"
            else:
                assert s.result.session_ids[-1] != old
        # the tab: once the proxy sends its cookie to the survivor, the tab reconnects by
        # itself (Streamlit's status widget goes); its next click runs on the survivor, in a
        # new session made from the tab's link: its own sentence
        deadline = time.monotonic() + 90
        while (context.request.get(proxy.url + "/_stcore/health").headers.get(
                bench_load.REPLICA_HEADER.lower()) != survivor
               or page.locator('[data-testid="stStatusWidget"]').count()):
            assert time.monotonic() < deadline, "the tab did not reconnect"
            page.wait_for_timeout(500)
        url_before = page.url
        page.get_by_role("button", name="Next ▶").click()
        page.get_by_role("heading", name=re.compile("^Queries Q")).first.wait_for(
            timeout=60_000)
        wait_for_app(page)
        assert sentence.input_value() == " ".join(words), (url_before, page.url)
        page.get_by_role("link", name=t("nav.multihead"), exact=True).click()
        page.get_by_role("heading", name=t("multihead.title")).first.wait_for(timeout=60_000)
        wait_for_app(page)
        assert sentence.input_value() == " ".join(words), (url_before, page.url)
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        for s in sessions:
            loop.run(s.close())
        loop.close()
        context.close()
