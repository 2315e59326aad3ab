"""Starting `ocular serve` and asking `ocular run` from Python tests (standard library only)."""
import re
import subprocess
import tempfile
import time

MODEL = "models/shapes-paligemma"
IMAGE = MODEL + "/sample.png"


def ocular_run(ocular, prompt, image=IMAGE, max_tokens=40, model=MODEL):
    """The answer `ocular run` prints (what every server answer is compared with)."""
    args = [ocular, "run", "-q", "--threads", "1", "-m", model, "-p", prompt,
            "--max-tokens", str(max_tokens)]
    if image:
        args += ["-i", image]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.rstrip("\n")


class Server:
    """`ocular serve` on a free loopback port; a context manager that stops it (SIGTERM) and
    checks that it exits 0."""

    def __init__(self, ocular, *extra, model=MODEL):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([ocular, "serve", "-m", model, "--port", "0", *extra],
                                     stderr=self.log)
        self.port = None
        for _ in range(1200):
            self.log.seek(0)
            text = self.log.read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m and "ready" in text:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not self.port:
            self.proc.kill()
            raise RuntimeError("ocular serve did not start:\n" + self.stderr())
        self.url = f"http://127.0.0.1:{self.port}"

    def stderr(self):
        self.log.seek(0)
        return self.log.read()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        rc = self.proc.wait(timeout=300)  # a large model unmaps slowly on a busy machine
        if exc[0] is None:
            assert rc == 0, f"the server exited {rc}:\n{self.stderr()}"
