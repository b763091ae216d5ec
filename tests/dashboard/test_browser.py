"""The dashboard in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
Selenium): overview, a job's timeline, a failed run, redrive refused without the token and done
with it, sign-out; phone width. Screenshots go to ``$CW_ARTEFACTS/dashboard`` (default
``/tmp/cronwarden-artefacts/dashboard``).

Chromium missing fails the test: ``.ci/run`` installs it. Locally, ``CW_SKIP_BROWSER=1`` skips.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import TOKEN

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
)


def _artefacts() -> Path:
    path = Path(os.environ.get("CW_ARTEFACTS", "/tmp/cronwarden-artefacts")) / "dashboard"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        if os.environ.get("CW_SKIP_BROWSER") == "1" and not os.environ.get("CI"):
            pytest.skip(f"CW_SKIP_BROWSER=1 and {missing} missing")
        pytest.fail(f"{missing} missing: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1280,900")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _wait_value(browser: Any, field: Any, value: str) -> None:
    """Poll (up to 5 s) until the input ``field`` holds ``value``."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 5).until(
        lambda _: field.get_attribute("value") == value, "the token field never held the token"
    )


def _wait_text(browser: Any, css: str, text: str) -> None:
    """Poll (up to 15 s) until the element ``css`` contains ``text`` (a navigation ended)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def has(driver: Any) -> bool:
        if driver.execute_script("return document.readyState") != "complete":
            return False
        return any(text in e.text for e in driver.find_elements(By.CSS_SELECTOR, css))

    try:
        # an element read while the next page replaces it is stale: look again, do not fail
        WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException,)).until(
            has, f"{css} never showed {text!r}"
        )
    except Exception as exc:
        browser.save_screenshot(str(_artefacts() / "failure.png"))
        page = browser.page_source[:3000]
        raise AssertionError(f"{css} never showed {text!r}; page: {page}") from exc


def test_dashboard_in_chromium(server: str, browser: Any, provider: Any) -> None:
    from selenium.webdriver.common.by import By

    shots = _artefacts()
    browser.get(server + "/")
    assert browser.title.startswith("Jobs")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")
    assert len(rows) == 7
    failing = browser.find_element(By.ID, "job-failing").text
    assert "alerting" in failing and "team-data" in failing
    browser.save_screenshot(str(shots / "overview.png"))

    browser.set_window_size(390, 844)  # a phone
    browser.get(server + "/")
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= 400, f"the overview scrolls sideways on a phone ({width}px)"
    browser.save_screenshot(str(shots / "overview-phone.png"))
    browser.set_window_size(1280, 900)

    browser.get(server + "/")
    browser.find_element(By.LINK_TEXT, "failing").click()
    _wait_text(browser, "h1", "failing")
    cells = browser.find_elements(By.CSS_SELECTOR, "ol.timeline li.cell a")
    assert len(cells) >= 21  # 25 windows; gap cells have no run to link to
    labels = [c.get_attribute("aria-label") for c in cells]
    assert labels[-1].endswith("failed, retrying")
    browser.save_screenshot(str(shots / "timeline.png"))

    cells[-1].click()
    _wait_text(browser, "h1", "failing · 2026-01-20T12:00Z")
    body = browser.find_element(By.TAG_NAME, "main").text
    assert "failed, retrying" in body and "password=***" in body and "hunter2" not in body
    browser.save_screenshot(str(shots / "run-failed.png"))

    # without the token: no form, and a wrong token is refused
    browser.get(server + "/dead-letters")
    assert not browser.find_elements(By.CSS_SELECTOR, "form.action")
    browser.get(server + "/login")
    browser.find_element(By.NAME, "token").send_keys("not-the-token-000000")
    browser.find_element(By.CSS_SELECTOR, "form button").click()
    _wait_text(browser, "main", "not the dashboard's access token")
    assert provider.queue().dlq_depth() == 1
    browser.save_screenshot(str(shots / "redrive-refused.png"))

    # with the token: sign in, redrive the dead letter (the field is read back before the click)
    field = browser.find_element(By.NAME, "token")
    field.clear()
    field.send_keys(TOKEN)
    _wait_value(browser, field, TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form button").click()
    _wait_text(browser, "h1", "Dead letters")
    browser.save_screenshot(str(shots / "dead-letters.png"))
    browser.find_element(By.CSS_SELECTOR, "form.action button").click()
    _wait_text(browser, "main", "Redrove 1 message(s)")
    assert provider.queue().dlq_depth() == 0
    browser.save_screenshot(str(shots / "redriven.png"))

    # sign out (a form post under Referrer-Policy: no-referrer): the forms are gone
    browser.find_element(By.CSS_SELECTOR, "form.signout button").click()
    _wait_text(browser, "main", "Signed out.")
    assert browser.find_elements(By.LINK_TEXT, "Sign in for actions")
    browser.get(server + "/dead-letters")
    assert not browser.find_elements(By.CSS_SELECTOR, "form.action")
