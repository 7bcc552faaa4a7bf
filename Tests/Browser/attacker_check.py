#!/usr/bin/env python3
"""Headless Chromium as the attacker against the gateway's HTTP listener (Playwright with Debian's chromium).

1. DNS rebinding: the browser resolves rebind.example to 127.0.0.1 (a host-resolver rule), as it would once
   the attacker's DNS re-points the name of the page it served. The attacker's script, running in the origin
   http://rebind.example:<port>, fetches /api/status and POSTs {"lock":"UNLOCK"} to
   /api/devices/demo_lock/set, which the browser sends to the gateway as same-origin requests. (Chromium's
   Local Network Access checks would also stop a page that came from the Internet; other browsers have none,
   so the attacker's script is run in a document loaded through the rebound name.)
2. Clickjacking: a page on http://evil.example:<port>/ frames http://127.0.0.1:<port>/; the frame must not
   render the status page.

Prints one JSON line: rebind_read_status, rebind_unlock_status (HTTP statuses the attacker's script saw),
framed_page_rendered. Exit status 0 when the checks ran, 3 when Playwright or Chromium is missing.
"""
import argparse
import json
import sys

from browser_support import chromium_path

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    print(json.dumps({"skipped": "playwright is not installed (pip install playwright)"}))
    sys.exit(3)


ATTACK_SCRIPT = """
window.attack = async function () {
  const result = {};
  try { result.read = (await fetch('/api/status')).status; } catch (e) { result.read = 'error ' + e; }
  try {
    result.unlock = (await fetch('/api/devices/demo_lock/set', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                               body: JSON.stringify({lock: 'UNLOCK'})})).status;
  } catch (e) { result.unlock = 'error ' + e; }
  return result;
};
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    browser_path = chromium_path()
    if not browser_path:
        print(json.dumps({"skipped": "no chromium executable (apt-get install chromium)"}))
        sys.exit(3)

    result = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=browser_path, headless=True,
            args=["--no-sandbox", "--host-resolver-rules=MAP rebind.example 127.0.0.1, MAP evil.example 127.0.0.1"])
        context = browser.new_context()
        page = context.new_page()
        origin = f"http://rebind.example:{args.port}"
        # The name now resolves to the box: the page's own document comes from the gateway's port (as after a
        # rebinding, whatever it is), and the attacker's script runs in that origin.
        page.goto(origin + "/", wait_until="load")
        page.evaluate("() => { " + ATTACK_SCRIPT + " }")
        attack = page.evaluate("attack()")
        result["rebind_read_status"] = attack.get("read")
        result["rebind_unlock_status"] = attack.get("unlock")

        framing = context.new_page()
        evil = f"http://evil.example:{args.port}"
        framing.route(f"{evil}/**", lambda route: route.fulfill(
            status=200, content_type="text/html",
            body=f'<!doctype html><iframe id="f" src="http://127.0.0.1:{args.port}/" width="800" height="600"></iframe>'))
        framing.goto(evil + "/", wait_until="load")
        framing.wait_for_timeout(1500)
        rendered = False
        for frame in framing.frames:
            if frame == framing.main_frame:
                continue
            try:
                rendered = rendered or frame.evaluate("document.title") == "lbs-gateway" or frame.locator("tr[data-id]").count() > 0
            except Exception:
                pass  # a blocked frame is an error page of another origin: nothing to read
        result["framed_page_rendered"] = rendered
        browser.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
