"""Headless Chromium driven by selenium, for the site's browser test and its screenshots.

Uses Debian's packages (`apt-get install -y chromium chromium-driver`) and selenium from PyPI (in the [test]
extra); the driver is named explicitly, so selenium never downloads one.
"""

from __future__ import annotations

import shutil

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = (
    "the browser test needs Chromium and its driver: apt-get update && apt-get install -y chromium chromium-driver "
    "(Debian; chromium-browser elsewhere), and selenium: pip install -e '.[test]'"
)


def missing() -> str | None:
    """Why Chromium cannot be driven here (with how to install what is missing), else None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return INSTALL_HINT
    if not any(shutil.which(b) for b in BROWSERS) or not shutil.which("chromedriver"):
        return INSTALL_HINT
    return None


def start(width: int = 1400, height: int = 1000):
    """A headless Chromium that keeps the console's messages (read them with `get_log("browser")`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--hide-scrollbars"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
