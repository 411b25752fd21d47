"""Drive the status page in a real headless Chromium (the Debian package, through Playwright):
log in with the admin token, see a cooling connection with its reason, see a new decision arrive
without reloading, find an upstream error message holding markup shown as text, reset the
cooling connection with the page's button (confirmed through the JSON API), and save a
screenshot. Prints "status page checks passed" when every check held.

Then: the reset is in the admin-changes table with its actor; an idle tab at the login form
asks nothing (no auth failure counted); and a read-only admin port (READ_ONLY_ADMIN_URL, no
token configured) shows its state with no button that would only be refused.

usage: check_status_page.py ADMIN_URL DATA_URL TOKEN SCREENSHOT READ_ONLY_ADMIN_URL"""
import json
import os
import sys
import time
import urllib.request

from playwright.sync_api import sync_playwright, expect

admin, data, token, shot, read_only = sys.argv[1:6]
CHROMIUM = os.environ.get("RINGSIDE_CHROMIUM", "/usr/bin/chromium")


def api(path):
    req = urllib.request.Request(admin + path, headers={"authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def auth_failures():
    req = urllib.request.Request(admin + "/metrics", headers={"authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("ringside_admin_auth_failures_total "):
                return float(line.split()[1])
    return None


def post_chat(model):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(data + "/v1/chat/completions", data=body,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers["x-request-id"]
    except urllib.error.HTTPError as e:
        return e.code, e.headers["x-request-id"]


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_page(viewport={"width": 1280, "height": 1400})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: d.accept())
    page.goto(admin + "/")
    # The port asks for its token: the page shows its form, and nothing else.
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    page.fill("#token", token)
    page.click("#login button")
    expect(page.locator("#app")).to_be_visible()
    # The limited key is cooling, with its reason and a countdown.
    row = page.locator("#connections tr", has_text="sim/a")
    expect(row).to_contain_text("cooling", timeout=10_000)
    expect(row).to_contain_text("rate_limited")
    expect(row.locator(".countdown")).to_have_text(__import__("re").compile(r"\d+(m \d+)?s"))
    expect(page.locator("#connections tr", has_text="sim/b")).to_contain_text("active")
    # A request made now shows up without a reload: its upstream's message holds markup.
    before = page.evaluate("performance.getEntriesByType('navigation').length")
    status, rid = post_chat("x")
    assert status >= 500 and rid, (status, rid)
    evil = page.locator('details.decision[data-id="%s"]' % rid)
    expect(evil).to_be_visible(timeout=10_000)
    evil.locator("summary").click()
    expect(evil).to_have_attribute("open", "")
    expect(evil.locator("table")).to_contain_text("<script>window.__pwned=1</script>")
    # Still open after the next refresh.
    page.wait_for_timeout(3500)
    expect(evil).to_have_attribute("open", "")
    assert page.evaluate("window.__pwned === undefined"), "the upstream's markup ran"
    assert page.evaluate("document.querySelectorAll('#decisions script, #decisions img').length") == 0
    assert page.evaluate("performance.getEntriesByType('navigation').length") == before, "the page reloaded"
    # A tenant's budget, against what it spent today.
    expect(page.locator("#spend tr", has_text="team-red")).to_contain_text("0 / 1000")
    # Traffic charts are drawn.
    expect(page.locator("#charts svg")).to_have_count(3)
    # Reset the cooling key with the page's button (the confirmation is accepted).
    page.click('button[data-reset="sim/a"]')
    deadline = time.time() + 10
    while True:
        conns = {c["connection"]: c for c in api("/admin/connections")["connections"]}
        if conns["a"]["state"] == "active":
            break
        assert time.time() < deadline, "the reset did not reach the API: %s" % conns["a"]
        time.sleep(0.1)
    expect(page.locator("#connections tr", has_text="sim/a")).to_contain_text("active", timeout=10_000)
    # The header says what runs; the reset is an admin change, by the admin token.
    expect(page.locator("#meta")).to_contain_text(__import__("re").compile(r"v\d+\.\d+\.\d+ .* up "))
    expect(page.locator("#audit tr", has_text="/admin/connections/sim/a/reset")).to_contain_text("admin token", timeout=10_000)
    page.screenshot(path=shot, full_page=True)
    # An idle tab at the login form asks nothing: no auth failure is counted while it waits.
    idle = browser.new_page()
    idle.on("pageerror", lambda e: errors.append(str(e)))
    failures = auth_failures()
    idle.goto(admin + "/")
    expect(idle.locator("#login")).to_be_visible()
    idle.wait_for_timeout(7000)
    assert auth_failures() == failures, "an idle login tab counted auth failures: %s -> %s" % (failures, auth_failures())
    # A read-only port: its state, no login, and no button that would only be refused.
    ro = browser.new_page()
    ro.on("pageerror", lambda e: errors.append(str(e)))
    ro.goto(read_only + "/")
    expect(ro.locator("#app")).to_be_visible(timeout=10_000)
    expect(ro.locator("#connections tr", has_text="sim/a")).to_be_visible()
    expect(ro.locator("#meta")).to_contain_text("read-only")
    assert ro.locator("button.danger").count() == 0, "a read-only page shows change buttons"
    assert not errors, "script errors on the page: %s" % errors
    browser.close()
print("status page checks passed")
