"""Two `ocular serve` replicas behind HAProxy (deploy/haproxy/haproxy.cfg) under load: one is
killed (SIGKILL) and started again.

Usage: haproxy_failover_test.py path/to/ocular [--report FILE]   (from the repository root)
Exits 77 (CTest: skipped) without haproxy (scripts/setup --lb). Checks, with 4 clients sending
chat completions all along:
  - before the kill both replicas answer (leastconn spreads the load), every answer equals
    `ocular run`'s;
  - the only failed requests are those in flight on the killed replica when it died (sent
    before its process was gone), each a 502 from HAProxy (not a hang: it ends long before the
    server timeout); every request started after that succeeds (HAProxy retries refused connections on the live replica
    and marks the dead one down by /health);
  - once the replica is back (HAProxy's health check sees /health 200), it gets traffic again;
  - a busy replica's /metrics has the gauges an inference gateway reads (queue depth, running
    requests, ocular_kv_cache_usage_ratio in (0, 1]).
Figures (requests, failures, how fast they failed, time to down / back) go to stdout and, with
--report, to FILE as JSON.
"""
import base64
import csv
import http.client
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MODEL = "models/shapes-paligemma"
IMAGE = MODEL + "/sample.png"
PROMPT = "caption en"
CLIENTS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def wait_until(what, predicate, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Replica:
    def __init__(self, ocular, port):
        self.ocular, self.port, self.proc = ocular, port, None

    def start(self):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [self.ocular, "serve", "-m", MODEL, "--port", str(self.port), "--threads", "1",
             "--parallel", "4"], stderr=self.log)

        def healthy():
            assert self.proc.poll() is None, "replica exited:\n" + self.stderr()
            try:
                return request(self.port, "GET", "/health", timeout=5)[0] == 200
            except OSError:
                return False

        wait_until(f"replica :{self.port} /health", healthy)

    def stderr(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=120)


class HAProxy:
    def __init__(self, replicas):
        self.port, self.stats_port = free_port(), free_port()
        env = dict(os.environ, OCULAR_LB_BIND=f"127.0.0.1:{self.port}",
                   OCULAR_LB_STATS=f"127.0.0.1:{self.stats_port}")
        for i, r in enumerate(replicas, 1):
            env[f"OCULAR_REPLICA_{i}"] = f"127.0.0.1:{r.port}"
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", "deploy/haproxy/haproxy.cfg"],
                                     env=env, stderr=self.log, stdout=self.log)
        wait_until("haproxy to see both replicas up",
                   lambda: all(s["status"] == "UP" for s in self.servers().values()))

    def servers(self):
        """r1/r2 → the stats CSV row (status UP/DOWN, stot = requests sent to it)."""
        try:
            status, _, body = request(self.stats_port, "GET", "/stats;csv", timeout=5)
        except OSError:
            return {"r1": {"status": "?"}, "r2": {"status": "?"}}
        rows = csv.DictReader(io.StringIO(body.decode().lstrip("# ")))
        return {r["svname"]: r for r in rows if r["pxname"] == "ocular_replicas"
                and r["svname"] in ("r1", "r2")}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def chat_body():
    with open(IMAGE, "rb") as f:
        url = "data:image/png;base64," + base64.b64encode(f.read()).decode()
    return json.dumps({"model": "shapes-paligemma", "max_tokens": 40, "messages": [
        {"role": "user", "content": [{"type": "text", "text": PROMPT},
                                     {"type": "image_url", "image_url": {"url": url}}]}]})


class Load:
    """CLIENTS threads sending the same chat completion through the balancer, back to back."""

    def __init__(self, port):
        self.port, self.body, self.done = port, chat_body(), threading.Event()
        self.records, self.lock = [], threading.Lock()
        self.threads = [threading.Thread(target=self.client) for _ in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def client(self):
        while not self.done.is_set():
            start = time.monotonic()
            try:
                status, headers, body = request(self.port, "POST", "/v1/chat/completions", self.body)
                replica = headers.get("X-Ocular-Replica", headers.get("x-ocular-replica", ""))
            except OSError as e:
                status, replica, body = f"error: {e}", "", b""
            with self.lock:
                self.records.append({"start": start, "end": time.monotonic(), "status": status,
                                     "replica": replica, "body": body})

    def count(self, replica=None):
        with self.lock:
            return sum(1 for r in self.records if r["status"] == 200 and
                       (replica is None or r["replica"] == replica))

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()


def main():
    ocular = sys.argv[1]
    report = sys.argv[sys.argv.index("--report") + 1] if "--report" in sys.argv else None
    if not shutil.which("haproxy"):
        print("haproxy is not installed (scripts/setup --lb): skipped")
        return 77
    expected = subprocess.run(
        [ocular, "run", "-q", "--threads", "1", "-m", MODEL, "-i", IMAGE, "-p", PROMPT,
         "--max-tokens", "40"], check=True, capture_output=True, text=True).stdout.rstrip("\n")
    replicas = [Replica(ocular, free_port()), Replica(ocular, free_port())]
    lb = load = None
    try:
        for r in replicas:
            r.start()
        lb = HAProxy(replicas)
        load = Load(lb.port)
        wait_until("answers from both replicas", lambda: load.count("r1") >= 3 and load.count("r2") >= 3)

        # The metrics an inference gateway's endpoint picker reads (docs/scale-out.md): queue
        # depth, running requests and the batch's KV-cache use, > 0 while r2 is answering.
        seen = {}

        def busy_metrics():
            body = request(replicas[1].port, "GET", "/metrics", timeout=5)[2].decode()
            for line in body.splitlines():
                if line and not line.startswith("#"):
                    name, value = line.rsplit(" ", 1)
                    seen[name] = float(value)
            return seen.get("ocular_kv_cache_usage_ratio", 0) > 0

        wait_until("ocular_kv_cache_usage_ratio > 0 on a busy replica", busy_metrics)
        assert 0 < seen["ocular_kv_cache_usage_ratio"] <= 1
        assert "ocular_queue_depth" in seen and "ocular_requests_running" in seen

        # Kill r1 while requests are in flight on it.
        wait_until("a request in flight on r1", lambda: int(lb.servers()["r1"]["scur"]) > 0)
        killed = time.monotonic()
        replicas[0].stop(signal.SIGKILL)  # returns once the process is reaped: its sockets closed
        dead = time.monotonic()
        wait_until("haproxy to mark r1 down", lambda: lb.servers()["r1"]["status"].startswith("DOWN"))
        down_s = time.monotonic() - killed
        after_kill = load.count()
        wait_until("answers after the kill", lambda: load.count() >= after_kill + 8)

        # Start it again: traffic must come back.
        restarted = time.monotonic()
        replicas[0].start()
        wait_until("haproxy to mark r1 up", lambda: lb.servers()["r1"]["status"] == "UP")
        back_s = time.monotonic() - restarted
        r1_before = load.count("r1")
        wait_until("answers from r1 after its restart", lambda: load.count("r1") >= r1_before + 3)
        load.stop()
    finally:
        if load:
            load.stop()
        if lb:
            lb.stop()
        for r in replicas:
            r.stop()

    records = load.records
    failed = [r for r in records if r["status"] != 200]
    ok = [r for r in records if r["status"] == 200]
    for r in ok:
        answer = json.loads(r["body"])["choices"][0]["message"]["content"]
        assert answer == expected, f"answer {answer!r} != ocular run's {expected!r}"
    for r in failed:
        # In flight on the killed replica: sent to it before it was gone (a connection it or
        # the kernel accepted), ended after the signal, with HAProxy's 502, long before the
        # 330 s server timeout.
        assert r["start"] < dead and r["end"] >= killed, f"a request failed outside the kill: {r}"
        assert r["status"] == 502, f"a request in flight failed with {r['status']}, not 502"
        assert r["end"] - killed < 30, f"a failed request took {r['end'] - killed:.1f} s"
    assert len(failed) <= CLIENTS
    after = [r for r in records if r["start"] > dead]
    assert after and all(r["status"] == 200 for r in after)
    figures = {
        "requests": len(records), "ok": len(ok), "failed_in_flight": len(failed),
        "failed_after_s": [round(r["end"] - killed, 3) for r in failed],
        "started_after_kill": len(after), "marked_down_after_s": round(down_s, 3),
        "marked_up_after_restart_s": round(back_s, 3),
        "by_replica": {n: sum(1 for r in ok if r["replica"] == n) for n in ("r1", "r2")},
    }
    print(json.dumps(figures))
    if report:
        with open(report, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
