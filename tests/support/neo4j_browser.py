"""Neo4j Browser 5 driven by Selenium in headless Chromium: the few things the KOPE tests do with it.

Selectors are Browser's own ``data-testid`` attributes (stable across 5.x; its
Cypress suite uses them) and the Monaco editor's textarea. Every step waits on
a condition (a frame appeared, a result loaded, the drawing holds what the
graph says it should), never on a fixed sleep.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

WAIT_S = 60
NAMESPACE = "browser-e2e"  # the memory the real-browser tests record and inspect
SLOW_OPERATOR = "elu"  # the recorded lineage 4x slower than PyTorch (tests/browser/conftest.py)
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> tuple[str, str] | None:
    """(browser, chromedriver) paths, or None when either is missing (scripts/install_browser.sh installs them)."""
    browser = os.environ.get("KOPE_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    driver = os.environ.get("KOPE_CHROMEDRIVER") or shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start_chromium(browser: str, driver: str, width: int = 1600, height: int = 1000) -> WebDriver:
    # Selenium Manager is never needed (both paths are given); keep it offline and quiet anyway.
    os.environ.setdefault("SE_OFFLINE", "true")
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


def _wait(driver: WebDriver, condition, what: str, timeout: float = WAIT_S):
    try:
        return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,)).until(condition)
    except TimeoutException:
        raise AssertionError(f"Neo4j Browser: timed out waiting for {what}") from None


@dataclass
class Drawing:
    """What a graph result frame draws."""

    nodes: int
    relationships: int
    node_labels: dict[str, int]  # label -> nodes drawn (the overview panel)
    relationship_types: dict[str, int]  # type -> relationships drawn


class Frame:
    def __init__(self, browser: NeoBrowser, element: WebElement) -> None:
        self.browser = browser
        self.element = element

    @property
    def command(self) -> str:
        return self.element.find_element(By.CSS_SELECTOR, "[data-testid=frameCommand]").text

    def error(self) -> str | None:
        found = self.element.find_elements(By.CSS_SELECTOR, "[data-testid=cypherFrameErrorMessage]")
        return found[0].text if found else None

    def loaded(self) -> bool:
        """A Cypher result, a guide or an error is shown; a client command (``:style``, ``:params``) has output."""
        if self.element.find_elements(By.CSS_SELECTOR, "[data-testid=frame-loaded-contents]"):
            return True
        if self.element.find_elements(By.CSS_SELECTOR, "[data-testid=carousel]") or self.error():
            return True
        contents = self.element.find_elements(By.CSS_SELECTOR, "[data-testid=frameContents]")
        return (
            self.command.startswith(":")
            and not self.command.startswith(":play")
            and bool(contents and contents[0].text.strip())
        )

    def status(self) -> str:
        return self.element.find_element(By.CSS_SELECTOR, "[data-testid=frameStatusbar]").text

    def records(self) -> int:
        match = re.search(r"started streaming (\d+) records?", self.status(), re.IGNORECASE)
        assert match, f"not a table result: {self.status()!r}"
        return int(match.group(1))

    def columns(self) -> list[str]:
        return [c.text for c in self.element.find_elements(By.CSS_SELECTOR, "[role=columnheader]")]

    def drawing(self) -> Drawing:
        def badges(kind: str) -> dict[str, int]:
            out = {}
            for e in self.element.find_elements(By.CSS_SELECTOR, f"[data-testid^=property-details-overview-{kind}-]"):
                name, count = re.match(r"^(.*) \((\d+)\)$", e.text).groups()
                if name != "*":
                    out[name] = int(count)
            return out

        return Drawing(
            nodes=len(self.element.find_elements(By.CSS_SELECTOR, "svg g.node")),
            relationships=len(self.element.find_elements(By.CSS_SELECTOR, "svg g.relationship")),
            node_labels=badges("node-label"),
            relationship_types=badges("relationship-type"),
        )

    def wait_drawing(self, nodes: int, relationships: int) -> Drawing:
        """The drawing once it holds ``nodes`` and ``relationships`` (Browser adds the relationships between
        the nodes on screen after the first render, when "Connect result nodes" is on)."""

        def done(_):
            d = self.drawing()
            return d if (d.nodes, d.relationships, sum(d.relationship_types.values())) == (
                nodes, relationships, relationships) else False  # fmt: skip

        try:
            return WebDriverWait(self.browser.driver, WAIT_S).until(done)
        except TimeoutException:
            raise AssertionError(
                f"frame {self.command[:60]!r} draws {self.drawing()}, expected {nodes} nodes, {relationships} rels"
            ) from None

    def close(self) -> None:
        self.element.find_element(By.CSS_SELECTOR, "button[title=Close]").click()


class NeoBrowser:
    def __init__(self, driver: WebDriver, url: str) -> None:
        self.driver = driver
        self.url = url

    def frames(self) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, "[data-testid=frame]")

    def connect(self, bolt_uri: str, user: str, password: str) -> None:
        self.driver.get(self.url)
        address = _wait(self.driver, lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=boltaddress]"), "login")
        scheme, _, host = bolt_uri.partition("://")
        for option in self.driver.find_elements(By.CSS_SELECTOR, "[data-testid=bolt-scheme-select] option"):
            if option.text == f"{scheme}://":
                option.click()
        address.send_keys(Keys.CONTROL, "a")  # clear() bypasses React's onChange: select and type over it
        address.send_keys(Keys.DELETE, host)
        assert address.get_attribute("value") == host, address.get_attribute("value")
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=username]").send_keys(user)
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=password]").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=connect]").click()
        _wait(self.driver, lambda d: "You are connected as user" in d.page_source, "the connection")
        # Browser runs its start command once connected; wait for it so it does not land between ours
        _wait(self.driver, lambda d: any(Frame(self, f).command == ":play start" for f in self.frames()), ":play start")

    def _run_editor(self, expected_command: str) -> Frame:
        before = self.frames()[0] if self.frames() else None
        self.driver.find_element(By.CSS_SELECTOR, "[data-testid=editor-Run]").click()

        def new_frame(_):
            top = self.frames()[0]
            if before is not None and top.id == before.id:
                return False
            frame = Frame(self, top)
            return (
                frame
                if " ".join(frame.command.split()) == " ".join(expected_command.split()) and frame.loaded()
                else False
            )

        return _wait(self.driver, new_frame, f"the result of {expected_command[:60]!r}")

    def run(self, command: str) -> Frame:
        """Type a one-line command into the editor and run it."""
        editor = self.driver.find_element(By.CSS_SELECTOR, "#monaco-main-editor textarea")
        editor.send_keys(command)
        return self._run_editor(command)

    def run_block(self, block: WebElement) -> Frame:
        """Click a guide's runnable block (Browser puts it in the editor), then run it."""
        text = block.get_attribute("textContent")
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", block)
        block.click()
        return self._run_editor(text)

    def close_all_but(self, keep: Frame) -> None:
        while len(self.frames()) > 1:
            count = len(self.frames())
            Frame(self, next(f for f in self.frames() if f.id != keep.element.id)).close()
            _wait(self.driver, lambda _, count=count: len(self.frames()) < count, "a frame to close")

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))
        return path


class Guide:
    """A ``:play`` frame: its slides, one at a time."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame

    def title(self) -> str:
        # the carousel renders the current slide only; its heading may be scrolled out of the frame's view
        return self.frame.element.find_element(By.CSS_SELECTOR, ".slide h3").get_attribute("textContent").strip()

    def blocks(self) -> list[WebElement]:
        return self.frame.element.find_elements(By.CSS_SELECTOR, ".slide pre.runnable")

    def next(self) -> None:
        self._step("nextSlide")

    def go_to(self, title: str) -> None:
        """Show the slide with this title: back to the first slide (the carousel has no previous button
        there), then forward until it shows."""
        while self.frame.element.find_elements(By.CSS_SELECTOR, "[data-testid=previousSlide]"):
            self._step("previousSlide")
        while self.title() != title:
            self.next()

    def _step(self, button: str) -> None:
        title = self.title()
        self.frame.element.find_element(By.CSS_SELECTOR, f"[data-testid={button}]").click()
        _wait(self.frame.browser.driver, lambda _: self.title() != title, f"the slide after {button}")
