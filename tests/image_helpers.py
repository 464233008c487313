"""The class image built and run on this machine, without a Docker engine or a registry
(tests/test_image.py; docs/deploy.md says what was measured with it):

- the base: Debian bookworm by debootstrap from the mirror apt is configured with here, imported
  into podman (localhost/debian:bookworm-minbase), then deploy/python-bookworm.Containerfile on
  top (Debian's Python 3.11 in a virtual environment). Both are kept between runs: the root file
  system as a tar under ATTNVIZ_IMAGE_CACHE (default ~/.cache/attnviz-image) and the images in
  podman's own store; each is remade only when missing (the Python base also when its
  Containerfile changes);
- the image: `buildah bud --isolation chroot --layers` of the Dockerfile with BASE set to that
  base and pip set up as this machine's pip is (read from `pip config list` when the build
  runs: its indexes and find-links folders mounted read-only at their own paths, its CA bundle
  and a pip.conf naming them mounted on /mnt, which every Debian image has empty, so nothing of
  them stays in the image). It is tagged IMAGE_REPO:<digest>, the digest of everything it is
  made of (`image_digest`: the files the Dockerfile copies, the build arguments, the base's id,
  the pip set-up), and an image of that tag is used again instead of built; when one is built,
  buildah's layer cache reuses the layers before the first one whose files changed (the build
  context is a copy of those files at one fixed time: `stage_context`). The tagged images
  beyond the newest KEEP are removed (`remove_stale_images`), with the layers only they used;
- containers: `podman run --runtime runc` (crun refuses this machine's hybrid cgroups) with
  ulimits of 1024 (podman's defaults are refused here).

    python -m tests.image_helpers build [TAG]      # build (default: the test's tag, reused
                                                   # when there); print the tag and seconds
    python -m tests.image_helpers up TAG N         # N replicas behind haproxy, until ^C
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("podman", "buildah", "debootstrap", "runc")
CACHE = Path(os.environ.get("ATTNVIZ_IMAGE_CACHE") or Path.home() / ".cache" / "attnviz-image")
DEBIAN_IMAGE = "localhost/debian:bookworm-minbase"
BASE_FILE = ROOT / "deploy" / "python-bookworm.Containerfile"
RUN = ["podman", "run", "--pull", "never", "--runtime", "runc",
       "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
PIP_MOUNT = "/mnt"          # the generated pip.conf and the CA bundle, inside the build
BUILD = ["buildah", "bud", "--isolation", "chroot", "--format", "docker", "--layers"]
IMAGE_REPO = "localhost/attnviz-image"      # the tests' image, tagged by image_digest
KEEP = 2                    # IMAGE_REPO's tags kept: the one in use and the newest other
CONTEXT_TIME = 315532800    # 1980-01-01: the time of every file of the staged build context


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def run(cmd: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """`cmd`, its output captured; RuntimeError with the end of its output if it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} … failed ({done.returncode}):\n"
                           + (done.stdout + done.stderr)[-4000:])
    return done


def image_exists(tag: str) -> bool:
    return subprocess.run(["podman", "image", "exists", tag]).returncode == 0


def image_id(tag: str) -> str:
    return run(["podman", "image", "inspect", "--format", "{{.Id}}", tag]).stdout.strip()


# ---- what this machine is set up with -------------------------------------------------------

def debian_mirror() -> str:
    """The URI of the Debian archive that apt here is configured with for bookworm's main
    (deb822 .sources files and one-line .list files alike)."""
    apt = Path("/etc/apt")
    for path in [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*"))]:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"(?m)^(\w[\w-]*):\s*(.*)$", stanza))
                if ("deb" in fields.get("Types", "").split()
                        and "bookworm" in fields.get("Suites", "").split()
                        and "main" in fields.get("Components", "").split()
                        and fields.get("Enabled", "yes") != "no"):
                    return fields["URIs"].split()[0]
        elif path.suffix == ".list" or path.name == "sources.list":
            for m in re.finditer(r"(?m)^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s+.*\bmain\b",
                                 text):
                return m.group(1)
    raise RuntimeError("apt here has no source for Debian bookworm's main")


def pip_options() -> dict[str, str]:
    """This machine's pip settings that the build's pip needs (`pip config list`: its files
    and PIP_* variables; a variable wins over a file, as in pip)."""
    listed = run([sys.executable, "-m", "pip", "config", "list"]).stdout
    found: dict[str, dict[str, str]] = {}
    for line in listed.splitlines():
        m = re.match(r"^([^.]*)\.([\w-]+)='(.*)'$", line)
        if m:
            found.setdefault(m.group(1), {})[m.group(2)] = m.group(3)
    merged = {**found.get("global", {}), **found.get("install", {}), **found.get(":env:", {})}
    keys = ("index-url", "extra-index-url", "find-links", "cert", "trusted-host",
            "default-timeout", "timeout", "no-index")
    return {k: v for k, v in merged.items() if k in keys and v}


def _local_path(location: str) -> Path | None:
    """The folder behind a find-links or index location, if it is on this machine."""
    if location.startswith("file://"):
        return Path(urlparse(location).path)
    if "://" not in location:
        return Path(location)
    return None


def _index_root(index: Path) -> Path:
    """The folder that holds a local package index and the files its pages link to (they
    often lie beside it: simple/six/index.html → ../../files/six-….whl)."""
    root = index.resolve()
    for page in sorted(index.glob("*/index.html"))[:5]:
        for href in re.findall(r'href="([^"#]+)', page.read_text(errors="replace")):
            if "://" not in href:
                target = (page.parent / href).resolve()
                root = Path(os.path.commonpath([root, target.parent]))
    return root


def pip_folders(options: dict[str, str]) -> list[Path]:
    """The folders of this machine that the build's pip reads: each local find-links folder,
    and each local index with the files its pages link to."""
    folders: list[Path] = []
    for key in ("index-url", "extra-index-url", "find-links"):
        for location in options.get(key, "").split():
            path = _local_path(location)
            if path is not None and path.is_dir():
                path = path if key == "find-links" else _index_root(path)
                if path not in folders:
                    folders.append(path)
    return folders


@contextmanager
def pip_setup() -> Iterator[tuple[dict[str, str], list[str], Path]]:
    """The build's pip set up as this machine's: yields (build arguments, volume options for
    buildah bud, the folder mounted on /mnt). The pip.conf is written afresh from `pip config
    list` (the CA bundle under its new name), in a temporary folder mounted read-only on /mnt;
    every local index and find-links folder is mounted read-only at its own path."""
    options = pip_options()
    volumes: list[str] = []
    for path in pip_folders(options):
        volumes += ["-v", f"{path}:{path}:ro"]
    with tempfile.TemporaryDirectory(prefix="attnviz-pip-") as tmp:
        lines = ["[global]"]
        for key in ("index-url", "extra-index-url", "find-links", "trusted-host", "no-index"):
            if key in options:
                lines.append(f"{key} = {options[key]}")
        if "cert" in options:
            shutil.copyfile(options["cert"], Path(tmp) / "ca.crt")
            lines.append(f"cert = {PIP_MOUNT}/ca.crt")
        timeout = options.get("default-timeout") or options.get("timeout")
        if timeout:
            lines.append(f"timeout = {timeout}")
        (Path(tmp) / "pip.conf").write_text("\n".join(lines) + "\n")
        volumes += ["-v", f"{tmp}:{PIP_MOUNT}:ro"]
        # torch from wherever this pip finds it (an empty TORCH_INDEX_URL: pip's own indexes)
        args = {"TORCH_INDEX_URL": "", "PIP_CONFIG_FILE": f"{PIP_MOUNT}/pip.conf"}
        yield args, volumes, Path(tmp)


# ---- the base --------------------------------------------------------------------------------

def _timed(cmd: list[str], log: Path, timeout: float, **kw) -> float:
    """Run `cmd`, each line of its output into `log` with the seconds since the start; the
    seconds it took. RuntimeError with the log's end if it fails."""
    t0 = time.monotonic()
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", **kw)
        for line in proc.stdout:
            out.write(f"[{time.monotonic() - t0:7.1f} s] {line}")
        code = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - t0)))
    if code != 0:
        raise RuntimeError(f"{cmd[0]} failed ({code}); the end of {log}:\n"
                           + log.read_text(errors="replace")[-4000:])
    return time.monotonic() - t0


def debian_image(log: Path) -> str:
    """localhost/debian:bookworm-minbase: from podman's store, else from the cached root file
    system's tar, else by debootstrap from this machine's Debian mirror (kept as that tar)."""
    if image_exists(DEBIAN_IMAGE):
        return DEBIAN_IMAGE
    tar = CACHE / "debian-bookworm-minbase.tar"
    if not tar.exists():
        rootfs = CACHE / "rootfs.partial"
        shutil.rmtree(rootfs, ignore_errors=True)
        try:
            _timed(["debootstrap", "--variant=minbase", "bookworm", str(rootfs),
                    debian_mirror()], log, 900)
            partial = tar.with_suffix(".partial")
            _timed(["tar", "-C", str(rootfs), "-cf", str(partial), "."], log, 300)
            partial.rename(tar)
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
    _timed(["podman", "import", str(tar), DEBIAN_IMAGE], log, 300)
    return DEBIAN_IMAGE


def python_base(log: Path) -> str:
    """The Dockerfile's BASE here: deploy/python-bookworm.Containerfile on the Debian image,
    tagged by a hash of both (built only when that tag is missing)."""
    debian = debian_image(log)
    digest = hashlib.sha256(BASE_FILE.read_bytes() + image_id(debian).encode()).hexdigest()
    tag = f"localhost/attnviz-python:bookworm-{digest[:12]}"
    if not image_exists(tag):
        with tempfile.TemporaryDirectory(prefix="attnviz-base-") as context:   # copies nothing
            _timed(["buildah", "bud", "--isolation", "chroot", "--format", "docker",
                    "--build-arg", f"DEBIAN={debian}", "-t", tag, "-f", str(BASE_FILE),
                    context], log, 900)
    return tag


@contextmanager
def cache_lock() -> Iterator[None]:
    """One process at a time makes the base, builds an image or removes one: two test runs at
    once (two pytest processes, or two checkouts) share the cache and podman's store, and the
    second finds what the first built."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# ---- what the image is made of ----------------------------------------------------------------

def _ignore_patterns(root: Path) -> list[re.Pattern]:
    """.dockerignore's patterns as regular expressions on a path relative to the context (a
    folder's pattern matches what it holds; `**/` any folders, `*` and `?` within one name)."""
    path = root / ".dockerignore"
    patterns = []
    for line in path.read_text().splitlines() if path.exists() else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            raise ValueError(f".dockerignore's exceptions are not read here: {line}")
        regex = re.escape(line.strip("/"))
        regex = (regex.replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
                 .replace(r"\*", "[^/]*").replace(r"\?", "[^/]"))
        patterns.append(re.compile(regex + r"(?:/.*)?\Z"))
    return patterns


def copy_sources(dockerfile: Path) -> list[str]:
    """The context's paths that the Dockerfile's COPY and ADD lines name (not --from a stage)."""
    sources = []
    for line in re.sub(r"\\\n", " ", dockerfile.read_text()).splitlines():
        words = line.split()
        if not words or words[0].upper() not in ("COPY", "ADD"):
            continue
        if any(w.startswith("--from") for w in words):
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if args[0].startswith("[") or any("://" in a for a in args):
            raise ValueError(f"not read here (JSON form or a URL): {line}")
        sources += args[:-1]
    return sources


def image_inputs(root: Path) -> dict[str, Path]:
    """What a build of root's Dockerfile reads of its context: the Dockerfile, .dockerignore and
    every file its COPY lines name (a folder: every file in it) that .dockerignore does not
    leave out; by path relative to root, in order."""
    ignored = _ignore_patterns(root)
    found: dict[str, Path] = {}
    names = ["Dockerfile", ".dockerignore", *copy_sources(root / "Dockerfile")]
    for name in dict.fromkeys(n for n in names         # a folder copied whole once
                              if not any(n.startswith(o + "/") for o in names)):
        matches = sorted(root.glob(name)) if glob.has_magic(name) else [root / name]
        for top in matches:
            if not top.exists():
                if name == ".dockerignore":
                    continue
                raise FileNotFoundError(f"the Dockerfile copies {name}, which {root} lacks")
            for path in [top] if top.is_file() else sorted(top.rglob("*")):
                rel = path.relative_to(root).as_posix()
                if path.is_file() and (name in ("Dockerfile", ".dockerignore")
                                       or not any(p.match(rel) for p in ignored)):
                    found[rel] = path
    return dict(sorted(found.items()))


def _mode(path: Path) -> int:
    """The mode a file has in the staged context: 0o755 if it is executable, else 0o644."""
    return 0o755 if path.stat().st_mode & 0o111 else 0o644


def stage_context(root: Path, dest: Path) -> None:
    """root's build context copied into the empty folder `dest`: the files of image_inputs,
    each with the mode _mode gives it, every file and folder with the time CONTEXT_TIME
    (buildah's layer cache keys a COPY by its files' times as well as their bytes: a fresh
    clone, or a file saved again unchanged, would miss it)."""
    for rel, path in image_inputs(root).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        target.chmod(_mode(path))
    for folder, dirs, files in os.walk(dest, topdown=False):
        for name in [*files, *dirs, ""]:
            os.utime(Path(folder) / name, (CONTEXT_TIME, CONTEXT_TIME))


def image_digest(root: Path, base_id: str, build_args: dict[str, str],
                 mounted: Path | None = None) -> str:
    """The SHA-256 of what a build of root's Dockerfile is made from: the build command
    (BUILD), the base image's id, the build arguments, each of image_inputs (its path, its
    mode in the staged context and its bytes) and each file of the folder `mounted` on /mnt
    (the build's pip.conf and CA bundle). Not the packages the build's pip finds: requirements
    and constraints pin their versions."""
    h = hashlib.sha256()

    def add(*parts: str | bytes) -> None:
        for part in parts:
            data = part.encode() if isinstance(part, str) else part
            h.update(len(data).to_bytes(8, "big") + data)

    add(" ".join(BUILD), base_id, json.dumps(build_args, sort_keys=True))
    for rel, path in image_inputs(root).items():
        add("context", rel, oct(_mode(path)), path.read_bytes())
    for path in sorted(mounted.iterdir()) if mounted is not None else []:
        add("mounted", path.name, path.read_bytes())
    return h.hexdigest()


# ---- the image ----------------------------------------------------------------------------------

def _in_use(tag: str) -> Path:
    """The file a test run holds a shared lock on while it uses IMAGE_REPO's `tag`."""
    return CACHE / f"in-use-{tag.rsplit(':', 1)[1]}.lock"


def _build_or_reuse(log: Path, tag: str | None) -> tuple[str, dict[str, float]]:
    """Under cache_lock: the Dockerfile built on the Python base into `tag`, or by default
    into IMAGE_REPO:<its image_digest>, unless that one is there already; (the tag, the
    seconds the base took (about 0 when it was there) and the build's (0 when reused))."""
    t0 = time.monotonic()
    base = python_base(log)
    base_seconds = time.monotonic() - t0
    with (pip_setup() as (args, volumes, mounted),
          tempfile.TemporaryDirectory(prefix="attnviz-context-") as context):
        stage_context(ROOT, Path(context))
        digest = image_digest(Path(context), image_id(base), args, mounted)
        tag = tag or f"{IMAGE_REPO}:{digest[:16]}"
        if tag.startswith(IMAGE_REPO + ":") and image_exists(tag):
            return tag, {"base": base_seconds, "image": 0.0}
        build_args = [f"--build-arg={k}={v}" for k, v in {"BASE": base, **args}.items()]
        seconds = _timed([*BUILD, *build_args, *volumes, "-t", tag,
                          "-f", f"{context}/Dockerfile", context], log, 1800)
    return tag, {"base": base_seconds, "image": seconds}


def build_image(log: Path, tag: str | None = None) -> tuple[str, dict[str, float]]:
    """The image built, or found built (_build_or_reuse), one process at a time."""
    with cache_lock():
        return _build_or_reuse(log, tag)


@contextmanager
def image_in_use(log: Path) -> Iterator[tuple[str, dict[str, float]]]:
    """IMAGE_REPO's image of this checkout, built or found built (_build_or_reuse), held
    while the with-block uses it: no other run removes it meanwhile; the stale ones are
    removed (remove_stale_images). Yields (its tag, the seconds of _build_or_reuse)."""
    with cache_lock():
        tag, seconds = _build_or_reuse(log, None)
        held = open(_in_use(tag), "a")
        fcntl.flock(held, fcntl.LOCK_SH)
        remove_stale_images(tag)
    try:
        yield tag, seconds
    finally:
        held.close()


def image_tags() -> list[str]:
    """IMAGE_REPO's tags, the newest image first."""
    listed = json.loads(run(["podman", "images", "--filter", f"reference={IMAGE_REPO}",
                             "--format", "json"]).stdout or "[]")
    tags = [(image["Created"], name) for image in listed for name in image.get("Names") or []
            if name.startswith(IMAGE_REPO + ":")]
    return [name for _, name in sorted(tags, reverse=True)]


def remove_stale_images(current: str, keep: int = KEEP) -> list[str]:
    """Under cache_lock: IMAGE_REPO's tags but `current` and the newest keep − 1 others,
    removed (`podman rmi`, which also removes the layers no other image uses), except one a
    test run holds (_in_use) or a container was made from; the tags removed."""
    removed = []
    for tag in [t for t in image_tags() if t != current][keep - 1:]:
        with open(_in_use(tag), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue                                    # a test run is using it
            if subprocess.run(["podman", "rmi", tag], capture_output=True).returncode == 0:
                removed.append(tag)
                _in_use(tag).unlink()
    return removed


# ---- containers ------------------------------------------------------------------------------

class Container:
    """`podman run -d` of `image` named `name`, with `options` (network, env) before the image
    and `command` after it (default: the image's own)."""

    def __init__(self, image: str, name: str, options: list[str] = (),
                 command: list[str] = ()):
        self.name = name
        subprocess.run(["podman", "rm", "-f", "--ignore", name], capture_output=True)
        self.started = time.monotonic()
        run([*RUN, "-d", "--name", name, *options, image, *command], timeout=120)

    def inspect(self, template: str) -> str:
        return run(["podman", "inspect", "--format", template, self.name]).stdout.strip()

    @property
    def pid(self) -> int:
        """The container's first process, as this machine's /proc sees it."""
        return int(self.inspect("{{.State.Pid}}"))

    def exec(self, *cmd: str, input: str | None = None, user: str | None = None,
             timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        """`cmd` in the container (as the image's user, or `user`)."""
        full = ["podman", "exec", *(["-i"] if input is not None else []),
                *(["--user", user] if user else []), self.name, *cmd]
        if check:
            return run(full, timeout=timeout, input=input)
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout,
                              input=input)

    def host_pids(self) -> list[int]:
        """Every process of the container, by its pid on this machine."""
        out = run(["podman", "top", self.name, "hpid"]).stdout.split()
        return [int(p) for p in out[1:]]

    def healthy(self) -> bool:
        """The image's own HEALTHCHECK, run now."""
        return subprocess.run(["podman", "healthcheck", "run", self.name],
                              capture_output=True).returncode == 0

    def logs(self) -> str:
        done = subprocess.run(["podman", "logs", self.name], capture_output=True, text=True)
        return done.stdout + done.stderr

    def kill(self) -> None:
        run(["podman", "kill", self.name])

    def remove(self) -> None:
        subprocess.run(["podman", "rm", "-f", "--ignore", "-t", "5", self.name],
                       capture_output=True)


def stream_client(container: Container, url: str, pages: list[str],
                  timeout: float = 600) -> list[dict]:
    """tests/stream_client.py run inside `container` against `url` (its own loopback): one
    dict per page."""
    source = (ROOT / "tests" / "stream_client.py").read_text(encoding="utf-8")
    # the image holds no tools/: its one way into Streamlit's protos goes in with the script,
    # as the module `tools.streamlit_compat` (standard library and Streamlit only)
    compat = (ROOT / "tools" / "streamlit_compat.py").read_text(encoding="utf-8")
    prelude = ("import sys as _sys, types as _types\n"
               "_compat = _types.ModuleType('tools.streamlit_compat')\n"
               f"exec(compile({compat!r}, 'tools/streamlit_compat.py', 'exec'), _compat.__dict__)\n"
               "_tools = _types.ModuleType('tools')\n_tools.streamlit_compat = _compat\n"
               "_sys.modules.update({'tools': _tools, 'tools.streamlit_compat': _compat})\n")
    future = "from __future__ import annotations\n"
    assert future in source                      # the prelude goes right after it
    source = source.replace(future, future + prelude, 1)
    done = container.exec("python", "-", url, *pages, input=source, timeout=timeout)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@contextmanager
def replicas(image: str, n: int, prefix: str = "attnviz-r"):
    """N containers of `image` on the host's network, each told its own free port on
    127.0.0.1 (STREAMLIT_SERVER_ADDRESS / _PORT) and healthy, behind haproxy with
    deploy/haproxy.cfg (server lines r1 … rN for these ports): yields (containers, ports,
    urls, proxy); everything is stopped and removed afterwards."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_load
    from tests.browser_helpers import free_port, wait_healthy
    from tests.deploy_helpers import Port

    ports = [free_port() for _ in range(n)]
    containers, proxy = [], None
    try:
        for i, port in enumerate(ports, 1):
            containers.append(Container(image, f"{prefix}{i}", [
                "--network", "host", "-e", "STREAMLIT_SERVER_ADDRESS=127.0.0.1",
                "-e", f"STREAMLIT_SERVER_PORT={port}"]))
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for url in urls:
            wait_healthy(url, None, 120)
        proxy = bench_load.Proxy([Port(p) for p in ports])
        yield containers, ports, urls, proxy
    finally:
        if proxy is not None:
            proxy.stop()
        for c in containers:
            c.remove()


def replicas_up(image: str, n: int) -> None:
    """N containers of `image` on 127.0.0.1 behind haproxy with deploy/haproxy.cfg (as
    tests/test_image.py runs them, ``replicas``), each warmed up by one visit of every page;
    prints the proxy's URL and each replica's pid and RSS, then the replicas' peak RSS every
    10 s until interrupted (SIGINT or SIGTERM; for benchmarks/bench_load.py --url)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_load

    def interrupted(*_):
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):     # a background job ignores SIGINT
        signal.signal(sig, interrupted)
    try:
        with replicas(image, n) as (containers, ports, urls, proxy):
            bench_load.warm_up(urls, bench_load.Words(8, seed=99), timeout=300)
            pids = [c.pid for c in containers]
            print(f"proxy {proxy.url}; replicas " + ", ".join(
                f"r{i} pid {pid} {bench_load.rss_mb([pid]):.0f} MB"
                for i, pid in enumerate(pids, 1)) + " (idle, after one visit of every page)",
                flush=True)
            peaks = [0.0] * n
            while True:
                for _ in range(20):
                    peaks = [max(p, bench_load.rss_mb([pid])) for p, pid in zip(peaks, pids)]
                    time.sleep(0.5)
                print("RSS now " + ", ".join(f"{bench_load.rss_mb([pid]):.0f}" for pid in pids)
                      + " MB; peak " + ", ".join(f"{p:.0f}" for p in peaks) + " MB",
                      flush=True)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["build"]:
        build_log = Path(tempfile.mkstemp(prefix="attnviz-build-", suffix=".log")[1])
        built, times = build_image(build_log, sys.argv[2] if len(sys.argv) > 2 else None)
        print(json.dumps({"tag": built, **times, "log": str(build_log)}))
    elif sys.argv[1:2] == ["up"] and len(sys.argv) == 4:
        replicas_up(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
