"""The dashboard in a real browser (issue 21): Debian's Chromium, headless, driven by
Playwright for Python against `baton serve` on a store with the shared corpus imported.

Usage: ui_browser.py BASE RUN V1 V2 KEY ARTIFACTS CHROMIUM

Checks, failing with a message on the first that does not hold:
- every page loads (200) with no console error and no uncaught script error;
- the runs page's text filter and agent filter change the rows, and every row left matches;
- a run's timeline expands a tool call, and "original" loads the stored message (recall's
  JSON) into the page, with the tool call's id in it;
- the diff of V1 and V2 shows added and dropped claims;
- activating a version from a page whose active version went stale shows the conflict (409)
  and the active version is unchanged;
- axe-core (vendored, `vendor/axe-core`) finds no serious or critical violation on any page;
- the keyboard alone reaches a run from the runs table (Tab, Enter), and on a run's timeline
  opens a tool call and loads its original (Tab, Enter).
A full-page screenshot of each step is saved in ARTIFACTS.
"""

import json
import os
import re
import sys
import urllib.request

from playwright.sync_api import sync_playwright

base, run, v1, v2, key, artifacts, chromium = sys.argv[1:8]
errors = []


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def api(method, path, body=None):
    request = urllib.request.Request(
        base + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def shot(page, name):
    page.screenshot(path=f"{artifacts}/{name}.png", full_page=True)


AXE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor", "axe-core", "axe-4.14.1.min.js")
violations = []


def audit(page, path):
    """axe-core's rules on the page as it stands; serious and critical violations are kept."""
    if page.evaluate("typeof window.axe") == "undefined":
        page.add_script_tag(path=AXE)
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => `${v.impact} ${v.id}: ${v.help} (${v.nodes.length}x, e.g. ${v.nodes[0].html.slice(0, 160)})`)"
    )
    violations.extend(f"{path}: {v}" for v in found)


def visit(page, path, name):
    response = page.goto(base + path)
    check(response is not None and response.status == 200, f"{path}: status {response and response.status}")
    page.wait_for_load_state("networkidle")
    shot(page, name)
    audit(page, path)


def focused(page):
    """What has the keyboard's focus: its tag, classes, href and text."""
    return page.evaluate(
        "() => { const e = document.activeElement; return {tag: e.tagName.toLowerCase(),"
        " cls: e.className || '', href: e.getAttribute('href') || '', text: (e.innerText || '').trim(),"
        " inRuns: !!e.closest('table.runs tbody'), inCall: !!e.closest('details.tool-call'),"
        " original: e.matches('button.original')} }"
    )


def tab_until(page, want, what, limit=400):
    """Presses Tab until `want(focused)` holds; fails after `limit` presses."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = focused(page)
        if want(now):
            return now
    fail(f"{limit} presses of Tab never reached {what}")


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    # The dashboard's own scripts come from /ui/assets; bypassing CSP lets the test inject axe.
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    page.on("console", lambda m: m.type == "error" and errors.append(f"{page.url}: console: {m.text}"))
    page.on("pageerror", lambda e: errors.append(f"{page.url}: script error: {e}"))

    # Every page loads.
    for path, name in [
        ("/ui/runs", "runs"),
        (f"/ui/runs/{run}", "run"),
        (f"/ui/runs/{run}/summaries", "summaries"),
        (f"/ui/runs/{run}/summaries/{v2}", "summary"),
        (f"/ui/runs/{run}/diff?from={v1}&to={v2}", "diff"),
        (f"/ui/runs/{run}/growth?compare=sliding", "growth"),
        ("/ui/usage", "usage-daily"),
        ("/ui/usage?report=session", "usage-session"),
        ("/ui/usage?report=blocks", "usage-blocks"),
        ("/ui/duplicates", "duplicates"),
        ("/ui/duplicates?tools=true", "duplicates-tools"),
    ]:
        visit(page, path, name)
    check(not errors, "errors while loading the pages:\n" + "\n".join(errors))

    # The growth page loads its chart after the page (htmx).
    visit(page, f"/ui/runs/{run}/growth", "growth-loaded")
    page.locator("#growth-chart svg").wait_for(state="visible", timeout=60_000)
    check("compacted: sliding" in page.locator("#growth-chart").inner_text(), "no sliding line")
    shot(page, "growth-chart")
    audit(page, f"/ui/runs/{run}/growth (with its chart)")
    check(not violations, "axe-core: serious or critical violations:\n" + "\n".join(violations))

    # The keyboard alone: from the runs table into a run.
    visit(page, "/ui/runs", "runs-keyboard")
    target = tab_until(page, lambda f: f["inRuns"] and f["tag"] == "a", "a link in the runs table")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_load_state("networkidle")
    check(page.url.endswith(target["href"]), f"Enter on {target} went to {page.url}")
    # On a timeline: open a tool call and load its original.
    visit(page, f"/ui/runs/{run}", "run-keyboard")
    tab_until(page, lambda f: f["inCall"] and f["tag"] == "summary", "a tool call's summary")
    call = page.locator("details.tool-call:has(summary:focus)")
    check(call.get_attribute("open") is None, "the tool call was open before Enter")
    page.keyboard.press("Enter")
    check(call.get_attribute("open") is not None, "Enter did not open the tool call")
    tab_until(page, lambda f: f["original"], "an original button")
    entry = page.locator("article:has(button.original:focus)")
    page.keyboard.press("Enter")
    entry.locator("pre.recalled").wait_for(state="visible", timeout=10_000)
    shot(page, "run-keyboard-original")

    # The filters change the rows.
    visit(page, "/ui/runs", "runs-before-filter")
    rows = page.locator("table.runs tbody tr")
    total = rows.count()
    check(total > 1, f"the runs page shows {total} rows")
    project = None
    for i in range(total):
        text = rows.nth(i).locator("td").nth(1).inner_text().strip()
        if len(text) >= 4:
            project = text
            break
    check(project is not None, "no row names a project")
    page.fill("form.filters input[name=q]", project)
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state("networkidle")
    shot(page, "runs-filtered-text")
    check(f"q={project}" in page.url.replace("%2F", "/"), f"the filter is not in the URL: {page.url}")
    filtered = page.locator("table.runs tbody tr")
    after = filtered.count()
    counted = page.locator("p.count")
    selected, every = int(counted.get_attribute("data-selected")), int(counted.get_attribute("data-all"))
    check(0 < after and 0 < selected < every, f"text filter {project!r}: {selected} runs of {every}")
    for i in range(after):
        check(project.lower() in filtered.nth(i).inner_text().lower(), f"row {i} lacks {project!r}")
    visit(page, "/ui/runs", "runs-again")
    page.select_option("form.filters select[name=agent]", "codex")
    page.click("form.filters button[type=submit]")
    page.wait_for_load_state("networkidle")
    shot(page, "runs-filtered-agent")
    agents = page.locator("table.runs tbody tr td:nth-child(3)").all_inner_texts()
    check(agents and all(a.strip() == "codex" for a in agents), f"agent filter: {agents[:5]}")

    # The timeline expands a tool call and shows its original.
    visit(page, f"/ui/runs/{run}", "run-timeline")
    call = page.locator("details.tool-call").first
    check(call.count() == 1, "the run's first page has no tool call")
    tool_id = call.get_attribute("data-tool-use")
    check(not call.locator("pre").is_visible(), "a tool call is expanded before any click")
    call.locator("summary").click()
    check(call.locator("pre").is_visible(), "the tool call did not expand")
    entry = call.locator("xpath=ancestor::article[1]")
    seq = entry.get_attribute("id").removeprefix("seq-")
    entry.locator("button.original").click()
    recalled = entry.locator("pre.recalled")
    recalled.wait_for(state="visible", timeout=10_000)
    original = json.loads(recalled.inner_text())
    check(str(original["seq"]) == seq, f"original of seq {seq} is {original['seq']}")
    check(any(b.get("id") == tool_id for b in original["content"]), f"{tool_id} not in the original")
    check(original == api("GET", f"/v1/runs/{run}/messages/{seq}"), "the original differs from the API's")
    shot(page, "run-timeline-expanded")

    # The diff shows added and dropped claims.
    visit(page, f"/ui/runs/{run}/diff?from={v1}&to={v2}", "diff-again")
    check(page.locator("tr.added").count() > 0, "the diff shows no added claim")
    check(page.locator("tr.dropped").count() > 0, "the diff shows no dropped claim")

    # A stale activation shows the conflict.
    visit(page, f"/ui/runs/{run}/summaries", "summaries-before-race")
    api("POST", f"/v1/runs/{run}/summaries/{v1}/activate", {"base": int(v2)})
    before = list(errors)
    with page.expect_navigation():
        page.click(f"button[form=activate-{v1}]")
    page.wait_for_load_state("networkidle")
    shot(page, "activation-conflict")
    check(page.locator("p.conflict").count() == 1, "no conflict shown")
    text = page.locator("p.conflict").inner_text()
    check(re.search(rf"v{v2}\b.*v{v1}\b.*is active now", text) is not None, f"conflict text: {text}")
    check(api("GET", f"/v1/runs/{run}")["active_summary_id"] == int(v1), "the lost race wrote")
    # The browser logs the 409 answer itself as a console error; nothing else may appear.
    new = [e for e in errors[len(before):] if "409" not in e]
    check(not new, "errors on the conflict page:\n" + "\n".join(new))
    errors[len(before):] = new
    check(not errors, "errors:\n" + "\n".join(errors))
    browser.close()

print("ok")
