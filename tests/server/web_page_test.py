"""The web page at / in real headless Chromium (Debian's `chromium`; `scripts/setup --web`).

Usage: web_page_test.py path/to/ocular OUT_DIR   (from the repository root)
Exits 77 (CTest: skipped) when chromium is not installed.
Loads the page with the demo image (a data: URL in the fragment) and a `detect star` task
that it runs at once, lets the answer stream, and checks the DOM Chromium dumps: the streamed
answer equals `ocular run`'s, one box per detected object is drawn over the image with its
label, the timings are shown. Writes OUT_DIR/web_page.png (a screenshot of the same run).
"""
import base64
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    print("chromium is not installed (scripts/setup --web): skipped")
    sys.exit(77)

OCULAR, OUT = sys.argv[1], sys.argv[2]


def chromium(url, *args):
    # A fresh profile per run; no sandbox (CI runs as root); virtual time lets the page finish
    # its fetch before the DOM is dumped or the screenshot taken.
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--hide-scrollbars",
             "--virtual-time-budget=60000", "--window-size=1100,720", *args, url],
            capture_output=True, text=True, timeout=240)


def main():
    expected = serve_util.ocular_run(OCULAR, "detect star")
    n_expected = expected.count("star")
    image = "data:image/png;base64," + base64.b64encode(open(serve_util.IMAGE, "rb").read()).decode()
    with serve_util.Server(OCULAR, "--threads", "1") as server:
        url = (server.url + "/?task=detect&text=star&max_tokens=40&run=1#image=" +
               urllib.parse.quote(image, safe=""))
        r = chromium(url, "--dump-dom")
        dom = r.stdout
        assert "<html" in dom, f"chromium printed no DOM (rc {r.returncode}):\n{r.stderr[-3000:]}"
        state = re.search(r'<body[^>]*data-state="(\w+)"', dom)
        assert state and state.group(1) == "done", (state and state.group(1), dom[-2000:])
        answer = re.search(r'<pre id="answer">(.*?)</pre>', dom, re.S)
        assert answer, "no answer element"
        got = html.unescape(answer.group(1))
        assert got == expected, (got, expected)
        boxes = re.findall(r'<div class="box" data-label="([^"]*)" style="([^"]*)"', dom)
        assert len(boxes) == n_expected and n_expected > 0, (boxes, expected)
        for label, style in boxes:
            assert label == "star", label
            assert re.search(r"left: [\d.]+%; top: [\d.]+%; width: [\d.]+%; height: [\d.]+%", style), style
        assert 'data-name="time to first token"' in dom and 'data-name="decode (server)"' in dom
        os.makedirs(OUT, exist_ok=True)
        shot = os.path.join(OUT, "web_page.png")
        if os.path.exists(shot):
            os.remove(shot)
        r = chromium(url, f"--screenshot={shot}")
        assert os.path.getsize(shot) > 1000, f"no screenshot:\n{r.stderr[-3000:]}"
    print(f"ok: the page streamed {expected!r} and drew {len(boxes)} box(es); screenshot {shot}")


if __name__ == "__main__":
    main()
