"""The site in a real browser (headless Chromium): the pages load without a console error, filtering by device
changes the rows, sorting orders them, and a case page shows its runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfsuite.site.build import build_site
from tests.browser import chromium

REPOSITORY = Path(__file__).resolve().parents[2]

# Slow: it starts a browser.
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(chromium.missing() is not None, reason=str(chromium.missing()))]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("browser") / "site"
    build_site([REPOSITORY / "baselines"], output)
    return output


@pytest.fixture(scope="module")
def browser():
    driver = chromium.start()
    yield driver
    driver.quit()


def console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def recorded_cases() -> int:
    """The cases the repository's machine files hold (the site lists each once; the published reference tables are
    not machine histories)."""
    import json

    files = [f for f in (REPOSITORY / "baselines").glob("*/*.json") if f.parent.name != "reference"]
    return sum(len(json.loads(f.read_text(encoding="utf-8"))["entries"]) for f in files)


def visible_rows(driver) -> list:
    from selenium.webdriver.common.by import By

    return [row for row in driver.find_elements(By.CSS_SELECTOR, "#cases tbody tr") if row.is_displayed()]


def test_the_index_loads_without_console_errors_and_lists_every_case(browser, site):
    browser.get((site / "index.html").as_uri())
    assert console_errors(browser) == []
    assert len(visible_rows(browser)) == recorded_cases()


def test_filtering_by_device_keeps_only_that_devices_rows(browser, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get((site / "index.html").as_uri())
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="device"]')).select_by_value("cpu")
    rows = visible_rows(browser)
    assert len(rows) == 2
    assert {row.get_attribute("data-device") for row in rows} == {"cpu"}
    assert browser.find_element(By.ID, "shown").text == f"2 of {recorded_cases()} cases"
    Select(browser.find_element(By.CSS_SELECTOR, 'select[data-filter="device"]')).select_by_value("")
    assert len(visible_rows(browser)) == recorded_cases()
    assert console_errors(browser) == []


def test_a_filter_in_the_address_is_applied_on_load(browser, site):
    browser.get((site / "index.html").as_uri() + "#device=cuda&mode=infer")
    rows = visible_rows(browser)
    assert rows and {(r.get_attribute("data-device"), r.get_attribute("data-mode")) for r in rows} == {
        ("cuda", "infer")}


def test_a_column_sorts_by_its_values_both_ways(browser, site):
    from selenium.webdriver.common.by import By

    browser.get((site / "index.html").as_uri())
    def last_column() -> list[float]:
        return [float(r.find_elements(By.TAG_NAME, "td")[8].get_attribute("data-value")) for r in visible_rows(browser)]

    button = browser.find_element(By.XPATH, '//th/button[text()="last"]')
    button.click()
    ascending = last_column()
    button.click()
    descending = last_column()
    assert ascending == sorted(ascending) and descending == sorted(ascending, reverse=True)
    assert ascending[0] < ascending[-1]


def test_a_case_page_shows_its_plot_and_runs(browser, site):
    from selenium.webdriver.common.by import By

    browser.get((site / "index.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, 'tr[data-device="cpu"][data-mode="infer"] td a').click()
    assert browser.title == "perfsuite: cpu-fp32-resnet18-bs4-infer-smoke on shared-2core-vm"
    plot = browser.find_element(By.CSS_SELECTOR, "figure.plot svg")
    assert plot.size["width"] > 600
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")) == 3
    assert console_errors(browser) == []
