"""Take the site's screenshots for docs/: the index and one case page of the committed baselines, and a case
page of a synthetic archive (made-up values with torch upgrades, rebaselines and called changes, from
tests/fixtures/site/synthetic.py), in headless Chromium, saved as small palette PNGs (docs/site-index.png,
docs/site-case.png, docs/site-case-synthetic.png).

    python tests/browser/screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY))

from perfsuite.site.build import build_site  # noqa: E402
from tests.browser import chromium  # noqa: E402
from tests.fixtures.site.synthetic import SyntheticPlan, write_synthetic_archive  # noqa: E402

CASE_PAGE = "cases/cuda--nvidia-h200--cuda-bf16-bert-base-bs32-train.html"
SYNTHETIC_PLAN = SyntheticPlan(machines=(("mps", "ci-m2-max"),), cases_per_machine=2, sessions=90)
SYNTHETIC_PAGE = "cases/mps--ci-m2-max--mps-fp32-resnet18-bs1-train.html"


def save_small(png: bytes, path: Path) -> None:
    """Write `png` as a 256-colour PNG: a page of text and lines loses nothing a reader sees."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    image.save(path, optimize=True)


def main() -> int:
    reason = chromium.missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="perfsuite-site-"))
    site, synthetic = folder / "site", folder / "synthetic"
    build_site([REPOSITORY / "baselines"], site)
    write_synthetic_archive(folder / "archive", SYNTHETIC_PLAN, seed=3)
    build_site([folder / "archive"], synthetic)
    driver = chromium.start(width=1280, height=900)
    try:
        driver.get((site / "index.html").as_uri() + "#device=cuda&mode=train")
        save_small(driver.get_screenshot_as_png(), REPOSITORY / "docs" / "site-index.png")
        driver.set_window_size(1280, 1200)
        driver.get((site / CASE_PAGE).as_uri())
        save_small(driver.get_screenshot_as_png(), REPOSITORY / "docs" / "site-case.png")
        driver.get((synthetic / SYNTHETIC_PAGE).as_uri())
        save_small(driver.get_screenshot_as_png(), REPOSITORY / "docs" / "site-case-synthetic.png")
    finally:
        driver.quit()
    print("wrote docs/site-index.png, docs/site-case.png, docs/site-case-synthetic.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
