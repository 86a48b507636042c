#!/usr/bin/python3
"""report_page.py INDEX_HTML OUT_PNG [--extra-costs] [--must-move]: opens a sweep's
index.html (written by `attnlab report`) from file:// in headless Chromium
through chromedriver, and fails (exit 1, saying what) unless:
- the page loads, its script runs (body[data-al-ready]) and the browser
  logs no console error (script errors and Content-Security-Policy
  refusals are console errors) and requests nothing but the page itself;
- clicking the metric's column heading sorts the configurations table by
  it (ascending, then descending), which reorders its rows;
- every trial link of the table points to a file or folder that exists;
- hovering each point of the trade-off plot shows a tooltip that names
  that point's configuration (with any drawn on the same spot);
- choosing another cost axis relabels the plot and moves the points (an
  axis that places them alike, as bytes held at the context do bytes per
  token without a local window, may leave them in place; with --must-move
  at least one axis must move them), and choosing the first again puts
  them back;
- unticking a configuration hides its validation curves;
- with --extra-costs, the axis list offers the extra summary columns.
Exit 77 (skip) when chromedriver or Chromium cannot be started. The page's
screenshot goes to OUT_PNG (printed)."""
import json
import os
import sys
import time
import urllib.parse

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError as e:
    print("report_page: skipped: no selenium (%s)" % e)
    sys.exit(77)


def fail(msg):
    print("report_page: FAIL: " + msg)
    sys.exit(1)


def start():
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("AL_CHROMIUM", "/usr/bin/chromium")
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1300,1000", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--disable-default-apps"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    svc = Service(os.environ.get("AL_CHROMEDRIVER", "/usr/bin/chromedriver"))
    try:
        return webdriver.Chrome(service=svc, options=opts)
    except Exception as e:  # no display, no sandbox, version mismatch: not the page's fault
        print("report_page: skipped: Chromium could not be started (%s)" % str(e).splitlines()[0])
        sys.exit(77)


def wait(d, cond, what, secs=20):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return
        time.sleep(0.05)
    fail("timed out waiting for " + what)


def check_logs(d, page_url):
    errors = [m for m in d.get_log("browser") if m.get("level") == "SEVERE"]
    if errors:
        fail("console errors: " + "; ".join(m["message"] for m in errors))
    for entry in d.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") != "Network.requestWillBeSent":
            continue
        url = msg["params"]["request"]["url"]
        if url.split("#")[0] != page_url:
            fail("the page requested " + url)


def rows(d):
    return [(r.get_attribute("data-name"), r) for r in
            d.find_elements(By.CSS_SELECTOR, "#al-configs tbody tr")]


def column_values(d, col):
    return [float(r.find_elements(By.TAG_NAME, "td")[col].get_attribute("data-v") or "nan")
            for _, r in rows(d)]


def check_sorting(d, metric):
    heads = d.find_elements(By.CSS_SELECTOR, "#al-configs thead th")
    col = next((i for i, h in enumerate(heads) if h.text.startswith(metric)), None)
    if col is None:
        fail("no column headed '%s' in %s" % (metric, [h.text for h in heads]))
    before = [n for n, _ in rows(d)]
    heads[col].click()
    up = [n for n, _ in rows(d)]
    v = [x for x in column_values(d, col) if x == x]
    if v != sorted(v):
        fail("sorting by %s (ascending) gave %s" % (metric, v))
    d.find_elements(By.CSS_SELECTOR, "#al-configs thead th")[col].click()
    down = [n for n, _ in rows(d)]
    v = [x for x in column_values(d, col) if x == x]
    if v != sorted(v, reverse=True):
        fail("sorting by %s (descending) gave %s" % (metric, v))
    if len(set(v)) > 1 and up == before and down == before:
        fail("sorting by %s did not reorder the rows" % metric)
    print("report_page: sorting by %s: %s -> %s -> %s" % (metric, before, up, down))


def check_links(d, base):
    links = d.find_elements(By.CSS_SELECTOR, "#al-configs .al-trials a")
    if not links:
        fail("no trial links in the table")
    for a in links:
        url = a.get_attribute("href")
        path = urllib.parse.unquote(urllib.parse.urlparse(url).path)
        if not path.startswith(base) or not os.path.exists(path):
            fail("a trial link goes to %s, which does not exist" % url)
    print("report_page: %d trial links, each to a file or folder that exists" % len(links))


def points(d):
    return d.find_elements(By.CSS_SELECTOR, "#al-tradeoff circle.al-pt")


def check_hover(d):
    pts = points(d)
    if len(pts) < 2:
        fail("the trade-off plot has %d points" % len(pts))
    tip = d.find_element(By.ID, "al-tip")
    for p in pts:
        name = p.get_attribute("data-name")
        ActionChains(d).move_to_element(p).perform()
        wait(d, lambda: tip.is_displayed(), "the tooltip of " + name, 5)
        named = [b.text.replace(" (baseline)", "") for b in tip.find_elements(By.TAG_NAME, "b")]
        if name not in named:
            fail("hovering %s shows a tooltip naming %s" % (name, named))
        ActionChains(d).move_to_element(d.find_element(By.ID, "al-cost")).perform()
        wait(d, lambda: not tip.is_displayed(), "the tooltip of %s to go" % name, 5)
    print("report_page: hovering each of %d points names its configuration" % len(pts))


def positions(d):
    return {p.get_attribute("data-name"): (float(p.get_attribute("cx")),
                                           float(p.get_attribute("cy"))) for p in points(d)}


def placement(data, key):
    """Where the page places each drawn configuration along axis key, as a
    fraction of the axis (log when the costs span 4x, as report.js does)."""
    import math
    pts = {c["name"]: c["cost"].get(key) for c in data["configs"]
           if c["drawable"] and c["q"] is not None and c["cost"].get(key) is not None}
    lo, hi = min(pts.values()), max(pts.values())
    f = math.log if lo > 0 and hi / lo >= 4 else (lambda v: v)
    span = f(hi) - f(lo)
    return {n: (f(v) - f(lo)) / span if span else 0.5 for n, v in pts.items()}


def same_placement(data, a, b):
    pa, pb = placement(data, a), placement(data, b)
    return pa.keys() == pb.keys() and all(abs(pa[n] - pb[n]) < 1e-6 for n in pa)


def axis_label(d):
    return d.find_element(By.CSS_SELECTOR, "#al-tradeoff svg").get_attribute("aria-label")


def check_axes(d, data, want_extra, must_move):
    sel = Select(d.find_element(By.ID, "al-cost"))
    keys = [o.get_attribute("value") for o in sel.options]
    if want_extra:
        for k in ["decode_bytes_per_token", "train_flops", "decode_tokens_per_s"]:
            if k not in keys:
                fail("the cost axes %s lack %s" % (keys, k))
    first, label = positions(d), axis_label(d)
    moved = []
    for k in keys[1:]:
        sel.select_by_value(k)
        now = positions(d)
        if axis_label(d) == label:
            fail("choosing %s left the plot's axis as it was (%s)" % (k, label))
        if any(n in now and abs(now[n][0] - xy[0]) > 2 for n, xy in first.items()):
            moved.append(k)
        elif not same_placement(data, keys[0], k):
            fail("choosing %s (which places the points unlike %s) moved no point" % (k, keys[0]))
    if must_move and not moved:
        fail("no other cost axis (%s) moves a point" % keys[1:])
    sel.select_by_value(keys[0])
    back = positions(d)
    if any(abs(back[n][0] - xy[0]) > 1e-6 or abs(back[n][1] - xy[1]) > 1e-6
           for n, xy in first.items()):
        fail("back on %s the points are not where they were" % keys[0])
    print("report_page: cost axes %s; choosing %s moved the points" % (keys, moved))


def check_curves(d):
    boxes = d.find_elements(By.CSS_SELECTOR, "#al-curve-toggles input")
    if not boxes:
        fail("no curve toggles")
    name = boxes[0].get_attribute("data-name")
    sel = '#al-curves path.al-curve[data-name="%s"]' % name.replace('"', '\\"')

    def shown():
        return [c.is_displayed() for c in d.find_elements(By.CSS_SELECTOR, sel)]
    if len(shown()) != 2 or not all(shown()):
        fail("%s has not two curves shown (by step, by tokens): %s" % (name, shown()))
    boxes[0].click()
    if any(shown()):
        fail("unticking %s left its curves shown" % name)
    d.find_elements(By.CSS_SELECTOR, "#al-curve-toggles input")[0].click()
    if not all(shown()):
        fail("ticking %s again did not show its curves" % name)
    print("report_page: %d curve toggles; %s's curves hide and show" % (len(boxes), name))


def screenshot(d, out):
    h = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1300, min(int(h) + 120, 12000))
    d.execute_script("window.scrollTo(0, 0); document.querySelectorAll('.al-scroll')"
                     ".forEach(function (e) { e.scrollLeft = 0; })")
    time.sleep(0.2)
    d.save_screenshot(out)
    plot = d.find_element(By.ID, "s-plots")
    plot.screenshot(out.replace(".png", "-plots.png"))
    print("report_page: screenshot " + out + " (plots: " + out.replace(".png", "-plots.png") + ")")


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: report_page.py INDEX_HTML OUT_PNG [--extra-costs] [--must-move]")
    page = os.path.abspath(argv[1])
    url = "file://" + urllib.parse.quote(page)
    d = start()
    try:
        d.get(url)
        wait(d, lambda: d.find_element(By.TAG_NAME, "body").get_attribute("data-al-ready") == "1",
             "the page's script")
        data = json.loads(d.find_element(By.ID, "al-data").get_attribute("textContent"))
        metric = data["metric"]
        check_sorting(d, metric)
        check_links(d, os.path.dirname(page) + "/")
        check_hover(d)
        check_axes(d, data, "--extra-costs" in argv, "--must-move" in argv)
        check_curves(d)
        screenshot(d, os.path.abspath(argv[2]))
        check_logs(d, url)
        print("report_page: ok: no console error, no request but the page")
    finally:
        d.quit()


if __name__ == "__main__":
    main(sys.argv)
