"""Open a drill's HTML report in headless Chromium (as tests/watch does for the status page) and
print how many scenario sections it shows and their names, as JSON."""
import json
import os
import sys

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("RINGSIDE_CHROMIUM", "/usr/bin/chromium")
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("file://" + os.path.abspath(sys.argv[1]))
    names = page.eval_on_selector_all("section.scenario", "s => s.map(e => e.dataset.name)")
    bars = page.eval_on_selector_all("section.scenario svg rect", "r => r.length")
    print(json.dumps({"names": names, "bars": bars, "errors": errors, "title": page.title()}))
    browser.close()
