#!/usr/bin/env python3
"""Drives the gateway's status page in headless Chromium (Playwright with Debian's chromium).

Checks: the page loads with no console errors; a state change made over MQTT appears in the page
within 1 s; a click on the page switches demo_light (seen on the MQTT state topic); a screenshot is saved.
Prints one JSON line with what it measured; exit status 0 only when every check passed, 3 when
Playwright or Chromium is missing.
"""
import argparse
import json
import subprocess
import sys
import time

from browser_support import chromium_path

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    print(json.dumps({"skipped": "playwright is not installed (pip install playwright)"}))
    sys.exit(3)


def retained_state(args, device):
    """The retained state of a device, read from the broker with mosquitto_sub."""
    out = subprocess.run(
        ["mosquitto_sub", "-h", args.host, "-p", str(args.port), "-t", f"{args.base}/device/{device}", "-C", "1", "-W", "3"],
        capture_output=True, text=True, timeout=10)
    return json.loads(out.stdout) if out.stdout.strip() else {}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--base", default="lbs")
    parser.add_argument("--screenshot", required=True)
    args = parser.parse_args()

    browser_path = chromium_path()
    if not browser_path:
        print(json.dumps({"skipped": "no chromium executable (apt-get install chromium)"}))
        sys.exit(3)

    result = {"console_errors": [], "failures": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=browser_path, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda message: message.type == "error" and result["console_errors"].append(message.text))
        page.on("pageerror", lambda error: result["console_errors"].append(str(error)))
        page.goto(args.url, wait_until="load")
        row = 'tr[data-id="demo_light"]'
        page.wait_for_selector(row, timeout=10_000)
        # A function, not a bare expression: Playwright polls an expression with eval() inside the page, which the
        # page's Content-Security-Policy (no 'unsafe-eval') refuses once the first check comes back false.
        page.wait_for_function("() => document.querySelector('#live').textContent === 'live'", timeout=10_000)

        # 1. A state change made over MQTT shows up in the page.
        state_cell = f'{row} span[data-key="state"] b'
        current = page.inner_text(state_cell).strip()
        wanted = "OFF" if current == "ON" else "ON"
        started = time.monotonic()
        subprocess.run(["mosquitto_pub", "-h", args.host, "-p", str(args.port), "-q", "1",
                        "-t", f"{args.base}/device/demo_light/set", "-m", json.dumps({"state": wanted})], check=True, timeout=10)
        try:
            page.wait_for_function(
                "([selector, wanted]) => { const b = document.querySelector(selector); return b && b.textContent.trim() === wanted; }",
                arg=[state_cell, wanted], timeout=1_000, polling=10)
            result["mqtt_to_page_ms"] = round((time.monotonic() - started) * 1000)
        except Exception:
            result["failures"].append(f"the MQTT change to {wanted} did not appear in the page within 1 s")

        # 2. A click on the page switches the light, through the gateway's command path.
        before = page.inner_text(state_cell).strip()
        after_wanted = "OFF" if before == "ON" else "ON"
        page.click(f'button.switch[data-device="demo_light"]')
        deadline = time.monotonic() + 5
        seen = None
        while time.monotonic() < deadline:
            seen = retained_state(args, "demo_light").get("state")
            if seen == after_wanted:
                break
            time.sleep(0.1)
        result["clicked_to"] = after_wanted
        result["mqtt_state_after_click"] = seen
        if seen != after_wanted:
            result["failures"].append(f"the click did not switch demo_light to {after_wanted} (MQTT says {seen})")
        try:
            page.wait_for_function(
                "([selector, wanted]) => { const b = document.querySelector(selector); return b && b.textContent.trim() === wanted; }",
                arg=[state_cell, after_wanted], timeout=2_000)
        except Exception:
            result["failures"].append("the page did not show the state the click set")

        # 3. The rest of the page is there: vendors, events, the energy plot.
        page.wait_for_selector('#vendors tr[data-vendor="demo"]', timeout=5_000)
        page.wait_for_selector("#energy polyline", state="attached", timeout=10_000)
        result["devices_shown"] = page.locator("#devices tbody tr").count()
        result["events_shown"] = page.locator("#events li").count()
        page.screenshot(path=args.screenshot, full_page=True)
        result["screenshot"] = args.screenshot
        browser.close()

    if result["console_errors"]:
        result["failures"].append("console errors: " + "; ".join(result["console_errors"]))
    print(json.dumps(result))
    sys.exit(0 if not result["failures"] else 1)


if __name__ == "__main__":
    main()
