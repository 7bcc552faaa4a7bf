"""What the browser checks share: finding Debian's Chromium (Playwright drives it with executable_path)."""
import os
import shutil


def chromium_path():
    for candidate in (os.environ.get("LBS_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None
