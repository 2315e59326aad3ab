"""The web page at / in real headless Chromium (Debian's `chromium`; `scripts/setup --web`).

Usage: web_page_test.py path/to/ocular OUT_DIR   (from the repository root)
Exits 77 (CTest: skipped) when chromium is not installed.
Drives Chromium over the DevTools protocol (--remote-debugging-pipe, standard library only) as
a user would: loads the page from `ocular serve` on the demo model, picks the demo image in the
file input, chooses the `detect` task with `star`, clicks Run and waits for the stream to end.
Checks in the DOM: the streamed answer equals `ocular run`'s, one box per detected object is
drawn over the image with its label, the timings are shown. Writes OUT_DIR/web_page.png.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    print("chromium is not installed (scripts/setup --web): skipped")
    sys.exit(77)

OCULAR, OUT = sys.argv[1], sys.argv[2]


class Browser:
    """Headless Chromium spoken to over --remote-debugging-pipe (fd 3: commands, fd 4: replies,
    each a JSON message ended by a NUL byte)."""

    def __init__(self):
        self.profile = tempfile.TemporaryDirectory()
        cmd_r, self.cmd_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        # fds 3 and 4 in the child, as the flag expects (kept open: pass_fds is applied after
        # preexec_fn).
        def child_fds():
            r, w = os.dup(cmd_r), os.dup(reply_w)  # fds 3/4 may be either of them now
            os.dup2(r, 3)
            os.dup2(w, 4)
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile.name}", "--window-size=1100,760", "about:blank"],
            preexec_fn=child_fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(reply_w)
        self.buf = b""
        self.next_id = 0

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.reply_r, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.profile.cleanup()


def main():
    expected = serve_util.ocular_run(OCULAR, "detect star")
    n_expected = expected.count("star")
    with serve_util.Server(OCULAR, "--threads", "1") as server:
        b = Browser()
        try:
            target = b.call("Target.createTarget", url="about:blank")["targetId"]
            s = b.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            b.call("Page.enable", session=s)

            def js(expr):
                r = b.call("Runtime.evaluate", session=s, expression=expr, returnByValue=True,
                           awaitPromise=True)
                if "exceptionDetails" in r:
                    raise RuntimeError(f"{expr}: {r['exceptionDetails']}")
                return r["result"].get("value")

            def wait_for(expr, what):
                for _ in range(1200):  # the bound only ends a hung run; no timing is asserted
                    if js(expr):
                        return
                    time.sleep(0.1)
                raise AssertionError(f"timed out waiting for {what}")

            b.call("Page.navigate", session=s, url=server.url + "/")
            wait_for("document.readyState === 'complete' && !!document.getElementById('file')",
                     "the page")
            # Pick the image as a user does: through the file input.
            doc = b.call("DOM.getDocument", session=s)["root"]["nodeId"]
            node = b.call("DOM.querySelector", session=s, nodeId=doc, selector="#file")["nodeId"]
            b.call("DOM.setFileInputFiles", session=s, nodeId=node,
                   files=[os.path.abspath(serve_util.IMAGE)])
            wait_for("document.getElementById('preview').complete && "
                     "document.getElementById('preview').naturalWidth > 0", "the image preview")
            js("const t = document.getElementById('task'); t.value = 'detect';"
               "t.dispatchEvent(new Event('change'));"
               "document.getElementById('text').value = 'star';"
               "document.getElementById('max').value = '40';"
               "document.getElementById('go').click(); true")
            wait_for("['done', 'error'].includes(document.body.dataset.state)", "the answer")
            error = js("document.getElementById('error').textContent")
            assert js("document.body.dataset.state") == "done", error
            got = js("document.getElementById('answer').textContent")
            assert got == expected, (got, expected)
            boxes = js("[...document.querySelectorAll('#boxes .box')].map(e => ({label: "
                       "e.dataset.label, text: e.textContent, left: e.style.left, top: e.style.top,"
                       " width: e.style.width, height: e.style.height, "
                       "w: e.getBoundingClientRect().width, h: e.getBoundingClientRect().height}))")
            assert len(boxes) == n_expected and n_expected > 0, (boxes, expected)
            for box in boxes:
                assert box["label"] == "star" and box["text"] == "star", box
                assert all(box[k].endswith("%") for k in ("left", "top", "width", "height")), box
                assert box["w"] > 1 and box["h"] > 1, box  # drawn, not collapsed
            timings = js("[...document.querySelectorAll('#timings dd')].map(e => e.dataset.name)")
            assert "time to first token" in timings and "decode (server)" in timings, timings
            os.makedirs(OUT, exist_ok=True)
            shot = os.path.join(OUT, "web_page.png")
            png = base64.b64decode(b.call("Page.captureScreenshot", session=s, format="png")["data"])
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
            with open(shot, "wb") as f:
                f.write(png)
        finally:
            b.close()
    print(f"ok: the page streamed {expected!r} and drew {len(boxes)} box(es); screenshot {shot}")


if __name__ == "__main__":
    main()
