"""The Browser guide, the GraSS style and the guide server (no database)."""

import re
import urllib.error
import urllib.request

import pytest

from kope.config import load_config
from kope.db.catalog import default_catalog
from kope.db.local import LocalNeo4j
from kope.errors import KopeError
from kope.memory.browser import GuideServer, load_slides, render_guide, style_file

LABELS = {"Operator", "Hardware", "Task", "Run", "Decision", "Outcome", "Kernel", "Insight", "Knowledge"}
CLASSES = {"Effective", "Partial", "Ineffective", "Negative", "Failed"}
MARKS = {"Root", "Backtrack", "Incumbent"}


def test_guide_has_one_slide_per_guide_query_each_with_its_own_parameters_then_its_query():
    slides = load_slides()
    html = render_guide("team-a")
    assert html.count("<slide ") == len(slides) >= 10
    assert html.count('class="pre-scrollable code runnable"') == 2 * len(slides)
    blocks = re.findall(r'<pre class="pre-scrollable code runnable">(.*?)</pre>', html, re.S)
    for slide, params, query in zip(slides, blocks[0::2], blocks[1::2], strict=True):
        assert slide.title and slide.paragraphs
        assert default_catalog().get(slide.name).mode == "read"
        assert params.startswith(":params {ns: &#x27;team-a&#x27;")
        used = set(re.findall(r"\$(\w+)", slide.query))
        assert used == set(slide.params), f"{slide.name}: the query reads {used}, the slide sets {slide.params}"
        assert all(f"{p}: null" in params for p in slide.params if p != "ns")
        assert "$ns" in query
    assert "<-[:FROM]-" not in html and "&lt;-[:FROM]-" in html


def test_grass_styles_every_label_and_class_with_a_colour_and_a_caption():
    text = style_file().read_text()
    blocks = re.findall(r"^(node\.\w+|relationship\.\w+|node|relationship)\s*\{(.*?)\}", text, re.S | re.M)
    styled = [name.split(".", 1)[1] for name, _ in blocks if name.startswith("node.")]
    assert set(styled) == LABELS | CLASSES | MARKS
    for _name, body in blocks:
        assert "caption:" in body
    props = {name: dict(re.findall(r"([\w-]+):\s*([^;]+);", body)) for name, body in blocks}
    assert all("color" in props[f"node.{label}"] for label in LABELS)
    colours = {props[f"node.{c}"]["color"] for c in CLASSES}
    assert len(colours) == len(CLASSES), "every outcome class has its own colour"
    # later rules win in Browser: the marks come after the classes, which come after Decision/Outcome
    order = {name: i for i, name in enumerate(styled)}
    assert max(order["Decision"], order["Outcome"]) < min(order[c] for c in CLASSES)
    assert max(order[c] for c in CLASSES) < min(order[m] for m in MARKS) and order["Incumbent"] == len(styled) - 1
    width = {name: int(props[name]["shaft-width"].rstrip("px")) for name in props if "shaft-width" in props[name]}
    assert width["relationship.FROM"] >= 4 and width["relationship.INCUMBENT"] >= 4
    assert width["relationship.USED"] == width["relationship.NEXT"] == 1


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


def test_guide_server_serves_the_lineage_page_fresh_on_every_request():
    calls = []

    def page():
        calls.append(1)
        return f"<html>page {len(calls)}</html>"

    server = GuideServer("default", lineage=page).start()
    try:
        for n in (1, 2):
            with urllib.request.urlopen(server.lineage_url, timeout=5) as response:
                assert response.status == 200 and response.read() == f"<html>page {n}</html>".encode()
    finally:
        server.stop()


def test_the_lineage_page_says_why_when_the_graph_cannot_be_read():
    def page():
        raise KopeError("no Neo4j server answers at bolt://127.0.0.1:1")

    server = GuideServer("default", lineage=page).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(server.lineage_url, timeout=5)
        assert caught.value.code == 503
        assert caught.value.read().decode() == "error: no Neo4j server answers at bolt://127.0.0.1:1\n"
    finally:
        server.stop()


def test_a_guide_parameter_must_default_to_null(tmp_path, monkeypatch):
    guide = tmp_path / "browser" / "guide"
    guide.mkdir(parents=True)
    (guide / "00_bad.cypher").write_text("// title: bad\n// param: run => 'x'\nRETURN $run\n")
    monkeypatch.setattr("kope.memory.browser.cypher_root", lambda: tmp_path)
    with pytest.raises(ValueError, match="a guide parameter is `ns` or `name => null`"):
        load_slides()
