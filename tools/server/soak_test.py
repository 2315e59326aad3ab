"""Soak test of `ocular serve` (loopback only, standard library; not part of CI).

  python3 tools/server/soak_test.py --ocular build/tools/cli/ocular              # 10 minutes
  python3 tools/server/soak_test.py --ocular build/tools/cli/ocular --duration 60

Starts `ocular serve` on the demo model, computes the answer of every request of load_test's
mix alone, lets the server settle under the mix for --settle seconds and records its RSS, then
for --duration seconds runs, together:
  - --clients streaming and non-streaming clients over the mix (10 % of the streams close
    their connection after the first text), every completed answer compared with its
    single-request answer;
  - a hostile client cycling through: a Content-Length of 200 MB (413 expected from the
    headers), a chunked body past the limit (413), a BMP decompression bomb (400), a valid
    request padded to 40 MB with an ignored field (200, the answer compared), a JSON body that
    is not one (400), a text/plain POST (415);
  - --slow sockets trickling a request head one byte per second, reopened when the server
    drops them at its deadline.
Checks: no 5xx, no lost answer (every request that was not dropped on purpose gets its
complete, correct answer; every hostile request its expected status), and the RSS after the
run back within 10 % of the settled value. Exit status 1 when a check fails.
Prints the requests by kind, the latency of complete answers (whole answer; time to first text
for streams), the RSS (warm-up, settled, peak during the run, after) and the machine's load.
"""
import argparse
import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load_test  # noqa: E402
from load_test import serve_util  # noqa: E402


def raw(port, data, wait=10.0):
    """Sends `data`, returns what came back until the server closed or `wait` passed."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    got = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got and (b"Content-Length: " in got or b"chunked" in got):
                head, _, body = got.partition(b"\r\n\r\n")
                n = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-length:")]
                if n and len(body) >= n[0]:
                    break
    except (socket.timeout, ConnectionError):
        pass
    finally:
        s.close()
    return got


def post(body, content_type="application/json", extra=b""):
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            + content_type.encode() + b"\r\n" + extra
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def bomb_url():
    bmp = b"BM" + struct.pack("<III", 54 + 16, 0, 54) + struct.pack("<Iii", 40, 30000, 30000)
    bmp += b"\x01\x00\x18\x00" + b"\0" * 24 + b"\x7f" * 16
    import base64
    return "data:image/bmp;base64," + base64.b64encode(bmp).decode()


def hostile_cases(messages, expected):
    """(name, request bytes, expected status, expected answer or None)."""
    big = json.dumps({"messages": messages, "max_tokens": 32, "user": "x" * (40 << 20)}).encode()
    bomb = json.dumps({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "caption en"},
        {"type": "image_url", "image_url": {"url": bomb_url()}}]}]}).encode()
    chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
    return [
        ("content-length 200 MB", b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Content-Type: application/json\r\nContent-Length: 209715200\r\n\r\n" + b" " * 65536,
         413, None),
        ("chunked past the limit", b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 1100,
         413, None),
        ("image bomb", post(bomb), 400, None),
        ("40 MB valid body", post(big), 200, expected),
        ("not JSON", post(b"{\"messages\": [oops"), 400, None),
        ("text/plain", post(b"{}", "text/plain"), 415, None),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ocular", required=True)
    ap.add_argument("--model", default=serve_util.MODEL)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--settle", type=float, default=60)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--slow", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=32)
    a = ap.parse_args()

    server = serve_util.Server(a.ocular, "--threads", str(a.threads), "--max-body-mb", "64",
                               "--max-queue", "64", "--read-timeout", "5", "--body-timeout", "10",
                               "--log-format", "off", model=a.model)
    port = server.port
    failures = []
    lock = threading.Lock()
    stats = {"codes": {}, "done": 0, "dropped": 0, "lost": [], "mismatch": [], "hostile": {},
             "hostile_bad": [], "slow_reopened": 0, "kinds": {}, "latency": [], "ttft": [],
             "hostile_ms": {}}
    try:
        reqs = load_test.mix()
        expected = {}
        for key, messages in reqs:
            status, answer, _, _, _ = load_test.chat("127.0.0.1", port, messages, a.max_tokens,
                                                     stream=False)
            if status != 200:
                sys.exit(f"soak_test: {key}: HTTP {status} {answer}")
            expected[key] = answer
        key0, messages0 = reqs[0]
        hostile = hostile_cases(messages0, expected[key0])
        stop = threading.Event()

        def client(i, until):
            rng = random.Random(1000 + i)
            while time.monotonic() < until and not stop.is_set():
                key, messages = rng.choice(reqs)
                stream = rng.random() < 0.7
                drop = stream and rng.random() < 0.1
                kind = ("stream, dropped" if drop else "stream") if stream else "non-streaming"
                t0 = time.monotonic()
                try:
                    status, answer, ttft, _, gone = load_test.chat(
                        "127.0.0.1", port, messages, a.max_tokens, stream=stream, disconnect=drop,
                        timeout=120)
                except (OSError, http.client.HTTPException) as e:
                    with lock:
                        stats["lost"].append(f"{key}: {type(e).__name__}: {e}")
                    continue
                elapsed = time.monotonic() - t0
                with lock:
                    stats["codes"][status] = stats["codes"].get(status, 0) + 1
                    stats["kinds"][kind] = stats["kinds"].get(kind, 0) + 1
                    if gone:
                        stats["dropped"] += 1
                    elif status != 200:
                        stats["lost"].append(f"{key}: HTTP {status} {answer[:200]}")
                    else:
                        stats["done"] += 1
                        stats["latency"].append(elapsed)
                        if ttft is not None:
                            stats["ttft"].append(ttft)
                        if answer != expected[key]:
                            stats["mismatch"].append((key, answer, expected[key]))

        def attacker(until):
            k = 0
            while time.monotonic() < until and not stop.is_set():
                name, data, want, answer = hostile[k % len(hostile)]
                k += 1
                t0 = time.monotonic()
                got = raw(port, data, wait=60)
                elapsed = time.monotonic() - t0
                status = int(got[9:12]) if got.startswith(b"HTTP/1.1 ") else 0
                ok = status == want
                if ok and answer is not None:
                    body = got.partition(b"\r\n\r\n")[2]
                    try:
                        ok = json.loads(body)["choices"][0]["message"]["content"] == answer
                    except (ValueError, KeyError):
                        ok = False
                with lock:
                    stats["codes"][status] = stats["codes"].get(status, 0) + 1
                    stats["hostile"][name] = stats["hostile"].get(name, 0) + 1
                    stats["hostile_ms"].setdefault(name, []).append(elapsed)
                    if not ok:
                        stats["hostile_bad"].append(f"{name}: got {got[:120]!r}")
                time.sleep(0.2)

        def slow_sockets(until):
            head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            socks = [None] * a.slow
            t = 0
            while time.monotonic() < until and not stop.is_set():
                for i in range(a.slow):
                    try:
                        if socks[i] is None:
                            socks[i] = socket.create_connection(("127.0.0.1", port))
                            with lock:
                                stats["slow_reopened"] += 1
                        socks[i].send(head[t % len(head):t % len(head) + 1])
                    except OSError:
                        if socks[i] is not None:
                            socks[i].close()
                        socks[i] = None
                t += 1
                time.sleep(1)
            for s in socks:
                if s is not None:
                    s.close()

        rss_peak = [0]

        def sample_rss(until):
            while time.monotonic() < until and not stop.is_set():
                rss_peak[0] = max(rss_peak[0], load_test.rss_kib(server.proc.pid))
                time.sleep(0.5)

        def phase(seconds):
            until = time.monotonic() + seconds
            threads = [threading.Thread(target=client, args=(i, until)) for i in range(a.clients)]
            threads += [threading.Thread(target=attacker, args=(until,)),
                        threading.Thread(target=slow_sockets, args=(until,)),
                        threading.Thread(target=sample_rss, args=(until,))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(3)  # idle: dropped sequences leave, buffers are freed
            return load_test.rss_kib(server.proc.pid)

        rss_start = load_test.rss_kib(server.proc.pid)
        rss_settled = phase(a.settle)
        for k in ("kinds", "latency", "ttft", "hostile", "hostile_ms"):  # count the run only
            stats[k] = type(stats[k])()
        rss_peak[0] = 0
        load_before = os.getloadavg()
        t0 = time.monotonic()
        rss_end = phase(a.duration)
        elapsed = time.monotonic() - t0
        load_after = os.getloadavg()
        n5xx = sum(n for c, n in stats["codes"].items() if c >= 500)
        print(f"soak: {a.settle:.0f} s to settle + {elapsed:.0f} s, {a.clients} clients, "
              f"{a.slow} slow sockets ({stats['slow_reopened']} opened in all), HTTP codes "
              f"{dict(sorted(stats['codes'].items()))}")
        print(f"answers: {stats['done']} complete and correct, {stats['dropped']} dropped on "
              f"purpose, {len(stats['lost'])} lost, {len(stats['mismatch'])} wrong; hostile "
              f"requests {stats['hostile']}, {len(stats['hostile_bad'])} unexpected")
        print(f"requests of the run by kind: {dict(sorted(stats['kinds'].items()))}, hostile "
              f"{sum(stats['hostile'].values())}, slow sockets {stats['slow_reopened']} opened")

        def ms(xs):
            return (f"p50 {1000 * load_test.percentile(xs, 0.5):.0f} ms, "
                    f"p99 {1000 * load_test.percentile(xs, 0.99):.0f} ms" if xs else "none")
        print(f"latency of complete answers: {ms(stats['latency'])}; time to first text of "
              f"streams: {ms(stats['ttft'])}")
        print("hostile requests' answer time: " + "; ".join(
            f"{name} {ms(xs)}" for name, xs in sorted(stats["hostile_ms"].items())))
        print(f"RSS: {rss_start / 1024:.1f} MiB after warm-up, {rss_settled / 1024:.1f} MiB "
              f"settled, {rss_peak[0] / 1024:.1f} MiB peak during the run, "
              f"{rss_end / 1024:.1f} MiB after the run "
              f"({100 * (rss_end - rss_settled) / rss_settled:+.1f} %)")
        print(f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.1f} before the run, "
              f"{load_after[0]:.1f} after (1 min); the soak's own processes included")
        if n5xx:
            failures.append(f"{n5xx} responses with a 5xx status")
        if stats["lost"]:
            failures.append(f"{len(stats['lost'])} lost answers, e.g. {stats['lost'][:3]}")
        if stats["mismatch"]:
            failures.append(f"{len(stats['mismatch'])} wrong answers, e.g. {stats['mismatch'][:2]}")
        if stats["hostile_bad"]:
            failures.append(f"unexpected answers to hostile requests: {stats['hostile_bad'][:3]}")
        if rss_end > 1.10 * rss_settled:
            failures.append("RSS not back within 10 % of its settled value")
    finally:
        server.__exit__(None, None, None)
    return load_test.report("soak_test", failures)


if __name__ == "__main__":
    sys.exit(main())
