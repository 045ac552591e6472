"""The picture of the report in the README and the docs (docs/images/report.png): the embedded example's report,
its top (the largest cause, the causes ranked, the per-rank table, the step's timeline), rendered in headless
Chromium.

    python bench/report_picture.py [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "traceql", "-q", "report", "-o", str(page_path)], check=True, cwd=ROOT)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"])
            page = browser.new_context(viewport={"width": 1100, "height": 800}, device_scale_factor=0.8).new_page()
            page.goto(page_path.as_uri())
            page.wait_for_function("document.querySelectorAll('.plot-container svg.main-svg').length > 3")
            box = page.locator("section").nth(2).bounding_box()  # causes, per rank, the timeline
            out = ROOT / "docs" / "images" / "report.png"
            page.screenshot(path=str(out), full_page=True,
                            clip={"x": 0, "y": 0, "width": 1100, "height": box["y"] + box["height"]})
            browser.close()
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
