"""The Browser guide, the GraSS style and the guide server (no database)."""

import re
import urllib.request

from kope.config import load_config
from kope.db.catalog import default_catalog
from kope.db.local import LocalNeo4j
from kope.memory.browser import GuideServer, load_slides, render_guide, style_file

LABELS = {"Operator", "Hardware", "Task", "Run", "Decision", "Outcome", "Kernel", "Insight", "Knowledge"}


def test_guide_has_one_slide_per_guide_query_each_runnable_and_escaped():
    slides = load_slides()
    html = render_guide("team-a")
    assert html.count("<slide ") == len(slides) >= 8
    assert ":param ns =&gt; &#x27;team-a&#x27;" in html
    for slide in slides:
        assert slide.title and slide.paragraphs and "$ns" in slide.query
        assert default_catalog().get(slide.name).mode == "read"
    assert html.count('class="pre-scrollable code runnable"') == len(slides) + 1
    assert "<-[:FROM]-" not in html and "&lt;-[:FROM]-" in html


def test_grass_styles_every_label_with_a_colour_and_a_caption():
    text = style_file().read_text()
    blocks = dict(re.findall(r"^(node\.\w+|relationship\.\w+|node|relationship)\s*\{(.*?)\}", text, re.S | re.M))
    styled = {name.split(".", 1)[1] for name in blocks if name.startswith("node.")}
    assert styled == LABELS
    for body in blocks.values():
        assert "color:" in body and "caption:" in body


def test_guide_server_sends_cors_headers_and_answers_the_preflight():
    server = GuideServer("default").start()
    try:
        pre = urllib.request.Request(
            server.guide_url,
            method="OPTIONS",
            headers={
                "Origin": "http://127.0.0.1:7474",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "pragma,cache-control",
            },
        )
        with urllib.request.urlopen(pre, timeout=5) as response:
            assert response.status == 204
            assert response.headers["Access-Control-Allow-Origin"] == "*"
            assert "pragma" in response.headers["Access-Control-Allow-Headers"]
        get = urllib.request.Request(
            server.guide_url, headers={"Origin": "http://127.0.0.1:7474", "pragma": "no-cache"}
        )
        with urllib.request.urlopen(get, timeout=5) as response:
            assert response.headers["Access-Control-Allow-Origin"] == "*"
            assert b"<slide" in response.read()
        with urllib.request.urlopen(server.style_url, timeout=5) as response:
            assert b"node.Decision" in response.read()
    finally:
        server.stop()


def test_local_server_conf_allows_guides_from_127_0_0_1(tmp_path):
    conf = LocalNeo4j(load_config({"data_dir": str(tmp_path)}, environ={})).conf_text()
    line = next(ln for ln in conf.splitlines() if ln.startswith("browser.remote_content_hostname_whitelist="))
    hosts = line.split("=", 1)[1].split(",")
    assert "127.0.0.1" in hosts and "localhost" in hosts
