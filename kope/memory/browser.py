"""Neo4j Browser inspection: the style file, a guide and the lineage page, served on 127.0.0.1.

The guide is generated from ``cypher/browser/guide/*.cypher``: each file is
one slide (``// title:``, ``// text:`` and ``// param:`` header lines, then one
parameterised query). Each slide sets its own parameters in a first runnable
block (``:params {ns: '<namespace>', decision: null}``: a null one is
defaulted by the query), so every slide runs on its own, in any order. The same files are
catalog statements, so the tests run every guide query against a real graph. Browser fetches remote guides and
styles with XHR from its own origin, so every response carries CORS headers
(and answers the pre-flight that Browser's no-cache headers trigger); the host
must be in the server's ``browser.remote_content_hostname_whitelist``, which
the local server's neo4j.conf sets to ``localhost,127.0.0.1``.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kope.db.catalog import cypher_root
from kope.errors import KopeError

GUIDE_PATH = "/kope.html"
STYLE_PATH = "/kope.grass"
LINEAGE_PATH = "/lineage.html"


@dataclass(frozen=True)
class Slide:
    name: str  # catalog name, e.g. browser/guide/01_best_lineage
    title: str
    paragraphs: tuple[str, ...]  # trusted HTML from the repository's own files
    query: str
    params: tuple[str, ...]  # in order; ``ns`` is the served namespace, every other one defaults to null

    def params_command(self, namespace: str) -> str:
        """``:params {ns: 'NS', decision: null}``: sets every parameter the query reads (and only those).
        A separate block: run in one block with the query, Browser shows a multi-statement summary, not the graph."""
        values = ", ".join(f"{name}: {repr(namespace) if name == 'ns' else 'null'}" for name in self.params)
        return f":params {{{values}}}"


_HEADER = re.compile(r"^//\s*(title|text|param):\s*(.*)$")
_PARAM = re.compile(r"^(ns|[a-z_]+\s*=>\s*null)$")


def browser_dir() -> Path:
    return cypher_root() / "browser"


def style_file() -> Path:
    return browser_dir() / "kope.grass"


def load_slides() -> list[Slide]:
    slides = []
    for path in sorted((browser_dir() / "guide").glob("*.cypher")):
        title, texts, params, body = path.stem, [], [], []
        for line in path.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            match = _HEADER.match(stripped)
            if match:
                key, value = match.groups()
                if key == "title":
                    title = value
                elif key == "text":
                    texts.append(value)
                else:
                    if not _PARAM.match(value.strip()):
                        raise ValueError(f"{path.name}: a guide parameter is `ns` or `name => null` (got {value!r})")
                    params.append(value.split("=>")[0].strip())
            elif not stripped.startswith("//"):
                body.append(line)
        slides.append(Slide(f"browser/guide/{path.stem}", title, tuple(texts), "\n".join(body).strip(), tuple(params)))
    return slides


def render_guide(namespace: str, slides: list[Slide] | None = None) -> str:
    """The guide as Neo4j Browser expects it: ``<slide>`` elements, each with two runnable ``<pre>`` blocks:
    the slide's parameters, then its query."""
    parts = []
    for slide in slides if slides is not None else load_slides():
        body = [f"<h3>{html.escape(slide.title)}</h3>"]
        body += [f"<p>{text}</p>" for text in slide.paragraphs]
        body.append(f'<pre class="pre-scrollable code runnable">{html.escape(slide.params_command(namespace))}</pre>')
        body.append(f'<pre class="pre-scrollable code runnable">{html.escape(slide.query)}</pre>')
        parts.append('<slide class="row-fluid">\n<div class="col-sm-12">\n' + "\n".join(body) + "\n</div>\n</slide>")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>KOPE Experience Graph</title></head><body>\n'
        '<article class="guide">\n<carousel class="deck container">\n'
        + "\n".join(parts)
        + "\n</carousel>\n</article>\n</body></html>\n"
    )


Page = Callable[[], tuple[str, bytes]]  # -> (content type, body), built on every request


class _Handler(BaseHTTPRequestHandler):
    server_version = "kope-browser-guide"
    routes: dict[str, Page] = {}

    def _cors(self) -> None:
        requested = self.headers.get("Access-Control-Request-Headers")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", requested or "pragma, cache-control, content-type")
        self.send_header("Access-Control-Max-Age", "600")

    def do_OPTIONS(self) -> None:  # http.server naming
        self.send_response(204)
        self._cors()
        self.end_headers()

    def do_GET(self) -> None:  # http.server naming
        path = self.path.split("?", 1)[0]
        if path == "/":
            path = GUIDE_PATH
        if path not in self.routes:
            self.send_response(404)
            self._cors()
            self.end_headers()
            return
        status = 200
        try:
            content_type, payload = self.routes[path]()
        except KopeError as exc:  # e.g. Neo4j went away: say so on the page, keep serving
            status, content_type = 503, "text/plain; charset=utf-8"
            payload = f"error: {exc.message}\n".encode()
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


class GuideServer:
    """Serves the guide, the style and (given a page builder) the lineage page on 127.0.0.1
    (port 0: any free port)."""

    def __init__(self, namespace: str, port: int = 0, *, lineage: Callable[[], str] | None = None) -> None:
        guide = render_guide(namespace).encode("utf-8")
        style = style_file().read_bytes()
        routes: dict[str, Page] = {
            GUIDE_PATH: lambda: ("text/html; charset=utf-8", guide),
            STYLE_PATH: lambda: ("text/plain; charset=utf-8", style),
        }
        if lineage is not None:
            routes[LINEAGE_PATH] = lambda: ("text/html; charset=utf-8", lineage().encode("utf-8"))
        handler = type("KopeGuideHandler", (_Handler,), {"routes": routes})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def guide_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{GUIDE_PATH}"

    @property
    def style_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{STYLE_PATH}"

    @property
    def lineage_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{LINEAGE_PATH}"

    def start(self) -> GuideServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="kope-guide", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
