"""Streamlit's browser protocol without a browser, and a server process's CPU and memory, for the
tests and the benchmarks (benchmarks/bench_load.py, benchmarks/bench_messages.py,
tests/test_server_limits.py); the protocol's messages through tools/streamlit_compat.py.

A client speaks what the frontend speaks on /_stcore/stream: the subprotocols "streamlit" and
a placeholder token (and, to get its session back after a reconnect, the session id); each
BackMsg ``rerun_script`` carries the link's query string and the page's URL path (``page_name``)
on a first visit, or a page's ``page_script_hash`` (read off the app's ``navigation``
ForwardMsg) and the widgets' states, as a click or a typed value does. The server answers with
ForwardMsgs until ``script_finished``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import websockets

from tools import streamlit_compat

FINISHED_OK = streamlit_compat.script_finished("FINISHED_SUCCESSFULLY")
FRAGMENT_OK = streamlit_compat.script_finished("FINISHED_FRAGMENT_RUN_SUCCESSFULLY")
EARLY_FOR_RERUN = streamlit_compat.script_finished("FINISHED_EARLY_FOR_RERUN")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def run(coroutine):
    """``asyncio.run(coroutine)`` on a thread of its own: a test process whose main thread already
    runs an event loop (Playwright's sync API, once a browser test has run) cannot start another
    there, and a thread has none."""
    result: dict = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coroutine)
        except BaseException as exc:               # noqa: BLE001 (raised again below)
            result["error"] = exc

    thread = threading.Thread(target=target, name="streamlit-client")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


# ---- a server's process tree: CPU and memory from /proc ------------------------------------------

def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes and their descendants (/proc/<pid>/stat)."""
    total = 0
    for root in pids:
        for p in process_tree(root):
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])      # utime, stime
    return total / CLK_TCK


def rss_mb(pids: list[int]) -> float:
    """Resident memory of these processes and their descendants, MB (2²⁰ bytes)."""
    total = 0
    for root in pids:
        for p in process_tree(root):
            try:
                total += int(Path(f"/proc/{p}/statm").read_text().split()[1])
            except OSError:
                continue
    return total * PAGE_SIZE / 2**20


# ---- the protocol ----------------------------------------------------------------------------

async def connect(ws_url: str, *, session_id: str | None = None,
                  headers: dict[str, str] | None = None, timeout: float = 120):
    """A websocket to Streamlit's /_stcore/stream as the frontend opens it (with `session_id`:
    a reconnect asking for that session back). No size limit on what it receives."""
    protocols = ["streamlit", "PLACEHOLDER_AUTH_TOKEN"]
    if session_id:
        protocols.append(session_id)
    return await websockets.connect(ws_url, subprotocols=protocols, additional_headers=headers,
                                    max_size=None, open_timeout=timeout, ping_interval=None)


def rerun_message(*, page_hash: str | None = None, page_name: str | None = None,
                  query: str = "", widgets=()) -> bytes:
    """A serialized BackMsg rerun_script: a page by its hash (a click in the navigation) or,
    on a first visit, by its URL path with the link's `query`; `widgets` are WidgetStates."""
    msg = streamlit_compat.back_msg()
    rerun = msg.rerun_script
    if page_hash is not None:
        rerun.page_script_hash = page_hash
    else:
        rerun.query_string, rerun.page_name = query, page_name or ""
    for widget in widgets:
        rerun.widget_states.widgets.append(widget)
    return msg.SerializeToString()


def text_state(widget_id: str, text: str):
    """A text box's value (a WidgetState), as the frontend sends it."""
    return streamlit_compat.widget_state(widget_id, string_value=text)


@dataclass
class Reply:
    """What the server sent for one rerun, until its script finished (or the socket closed)."""

    messages: list = field(default_factory=list)            # ForwardMsgs
    sizes: list[int] = field(default_factory=list)        # each message's bytes
    finished: bool = False
    closed: int | None = None                             # the close code, if it closed

    def elements(self, kind: str | None = None) -> list:
        """The new elements (Element protos), of one `kind` ("text_area", "alert" …)."""
        out = []
        for m in self.messages:
            if m.WhichOneof("type") == "delta" and m.delta.WhichOneof("type") == "new_element":
                e = m.delta.new_element
                if kind is None or e.WhichOneof("type") == kind:
                    out.append(e)
        return out

    def texts(self) -> list[str]:
        """Every alert's, Markdown's and heading's text."""
        return [getattr(e, e.WhichOneof("type")).body for e in self.elements()
                if e.WhichOneof("type") in ("alert", "markdown", "heading")]


class Client:
    """One browser tab's session: `open`, then `rerun` (a first visit, a page, typed values)."""

    def __init__(self, base_url: str, timeout: float = 120):
        self.http = base_url.rstrip("/")
        self.ws_url = "ws" + self.http[4:] + "/_stcore/stream"
        self.timeout = timeout
        self.ws = None
        self.session_id: str | None = None
        self.pages: dict[str, str] = {}          # url path ("home" for "") → page_script_hash

    async def open(self) -> None:
        self.ws = await connect(self.ws_url, session_id=self.session_id, timeout=self.timeout)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    async def rerun(self, page: str, *, query: str = "", widgets=()) -> Reply:
        """Run `page` (its URL path, "home" for Home): a first visit with the link's `query`
        until the navigation named the pages, then by its hash; with `widgets`' states."""
        if page in self.pages:
            data = rerun_message(page_hash=self.pages[page], widgets=widgets)
        else:
            data = rerun_message(page_name="" if page == "home" else page, query=query,
                                 widgets=widgets)
        try:
            await self.ws.send(data)
        except websockets.ConnectionClosed as closed:      # the server refused it midway
            return Reply(closed=closed.rcvd.code if closed.rcvd else 1006)
        return await self.receive()

    async def receive(self) -> Reply:
        """The messages of one rerun, until its script finished (or the socket closed)."""
        reply = Reply()
        while True:
            try:
                fwd, size = await self.receive_one()
            except websockets.ConnectionClosed as closed:
                reply.closed = closed.rcvd.code if closed.rcvd else 1006
                return reply
            reply.messages.append(fwd)
            reply.sizes.append(size)
            if fwd.WhichOneof("type") == "script_finished":
                if fwd.script_finished in (FINISHED_OK, FRAGMENT_OK):
                    reply.finished = True
                    return reply
                if fwd.script_finished != EARLY_FOR_RERUN:
                    return reply             # (a run that st.rerun() ended: the next follows)

    async def receive_one(self) -> tuple:
        """The next message (a ForwardMsg) and its size; notes the session id and the pages'
        hashes."""
        raw = await asyncio.wait_for(self.ws.recv(), self.timeout)
        fwd = streamlit_compat.forward_msg(raw)
        kind = fwd.WhichOneof("type")
        if kind == "new_session" and self.session_id is None:
            self.session_id = fwd.new_session.initialize.session_id
        elif kind == "navigation":
            for p in fwd.navigation.app_pages:
                self.pages[p.url_pathname or "home"] = p.page_script_hash
        return fwd, len(raw)
