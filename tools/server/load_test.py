"""Load test of `ocular serve` (loopback only, bounded in requests and time; standard library).

  python3 tools/server/load_test.py --ocular build/tools/cli/ocular            # 32 clients, 120 s
  python3 tools/server/load_test.py --ocular build/tools/cli/ocular --clients 8 --disconnect 0

Starts `ocular serve` on the demo model on a free 127.0.0.1 port (or uses --url, which must be
a loopback address), computes the answer of every request in the mix alone (one request at a
time, greedy), then runs --clients streaming clients for --duration seconds (at most
--max-requests in all): mixed image / text-only prompts over a few images, --disconnect of
them closing the connection after their first text. Checks: no 5xx, every completed answer
equals its single-request answer, and afterwards the server's KV accounting is back to zero
with nothing running or waiting and its RSS back near the warmed-up baseline. Prints
requests/s, p50/p99 time to first token, tokens/s, the decode batch-size histogram and the
image-cache hit rate. Exit status 1 when a check fails.
"""
import argparse
import base64
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "server"))
import serve_util  # noqa: E402

IMAGES = ["models/shapes-paligemma/sample.png", "testdata/golden/inputs/photo.png",
          "testdata/golden/inputs/gray.png", "testdata/golden/inputs/rgba.png"]
IMAGE_PROMPTS = ["caption en", "detect star", "detect square ; triangle",
                 "answer en what color is the square?", "caption es"]
TEXT_PROMPTS = ["caption en", "answer en how many sides does a triangle have?"]


def data_url(path):
    return "data:image/png;base64," + base64.b64encode(open(path, "rb").read()).decode()


def mix(n_images=len(IMAGES), n_prompts=len(IMAGE_PROMPTS)):
    """Every request of the mix: (key, messages). 4 images x 5 prompts + 2 text-only (or the
    first n_images x n_prompts)."""
    out = []
    for path in IMAGES[:n_images]:
        url = data_url(path)
        for p in IMAGE_PROMPTS[:n_prompts]:
            out.append((f"{os.path.basename(path)}|{p}",
                        [{"role": "user", "content": [{"type": "text", "text": p},
                                                      {"type": "image_url", "image_url": {"url": url}}]}]))
    for p in TEXT_PROMPTS:
        out.append((f"text|{p}", [{"role": "user", "content": p}]))
    return out


def chat(host, port, messages, max_tokens, stream, disconnect=False, timeout=1800, gaps=None):
    """One request. Returns (status, answer, ttft_s, completion_tokens, disconnected); appends
    the seconds between consecutive streamed text pieces to `gaps` when it is a list."""
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "stream": stream,
                       "stream_options": {"include_usage": True} if stream else None})
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.monotonic()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200 or not stream:
        data = res.read()
        conn.close()
        if res.status != 200:
            return res.status, data.decode(errors="replace"), None, 0, False
        j = json.loads(data)
        return 200, j["choices"][0]["message"]["content"], None, j["usage"]["completion_tokens"], False
    answer, ttft, tokens, last = "", None, 0, None
    while True:
        line = res.readline()
        if not line:
            break
        line = line.decode().rstrip("\n")
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            break
        j = json.loads(data)
        if "error" in j:
            conn.close()
            return 500 if j["error"].get("type") == "server_error" else 504, str(j), ttft, 0, False
        if j.get("usage"):
            tokens = j["usage"]["completion_tokens"]
        for c in j.get("choices", []):
            piece = c.get("delta", {}).get("content")
            if piece:
                now = time.monotonic()
                if ttft is None:
                    ttft = now - t0
                elif gaps is not None:
                    gaps.append(now - last)
                last = now
                answer += piece
                if disconnect:
                    conn.sock.shutdown(socket.SHUT_RDWR)
                    conn.close()
                    return 200, answer, ttft, 0, True
    conn.close()
    return 200, answer, ttft, tokens, False


def metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def percentile(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ocular", help="the ocular binary (starts its own server)")
    ap.add_argument("--model", default=serve_util.MODEL)
    ap.add_argument("--url", help="a running server on 127.0.0.1 instead")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--max-requests", type=int, default=20000)
    ap.add_argument("--disconnect", type=float, default=0.10)
    ap.add_argument("--text-share", type=float, default=0.2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--images", type=int, default=len(IMAGES),
                    help="use the first N images of the mix (a large model: fewer answers alone)")
    ap.add_argument("--image-prompts", type=int, default=len(IMAGE_PROMPTS),
                    help="use the first N image prompts of the mix")
    ap.add_argument("--prefill-chunk", type=int, default=0, help="the server's (0: its default)")
    a = ap.parse_args()

    server = None
    if a.url:
        u = urllib.parse.urlparse(a.url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            sys.exit("load_test: --url must be a loopback address")
        host, port = u.hostname, u.port
    else:
        if not a.ocular:
            sys.exit("load_test: --ocular or --url")
        args = ["--parallel", str(a.parallel), "--max-queue", str(max(16, 2 * a.clients))]
        if a.threads:
            args += ["--threads", str(a.threads)]
        if a.prefill_chunk:
            args += ["--prefill-chunk", str(a.prefill_chunk)]
        server = serve_util.Server(a.ocular, *args, model=a.model)
        host, port = "127.0.0.1", server.port
    failures = []
    try:
        reqs = mix(a.images, a.image_prompts)
        image_reqs = [r for r in reqs if not r[0].startswith("text|")]
        text_reqs = [r for r in reqs if r[0].startswith("text|")]
        if a.text_share >= 1:
            image_reqs = []
        elif a.text_share <= 0:
            text_reqs = []
        # The answer of each request of the mix alone.
        expected = {}
        for key, messages in image_reqs + text_reqs:
            status, answer, _, _, _ = chat(host, port, messages, a.max_tokens, stream=False)
            if status != 200:
                sys.exit(f"load_test: {key}: HTTP {status} {answer}")
            expected[key] = answer
        base = metrics(host, port)
        rss0 = rss_kib(server.proc.pid) if server else 0

        lock = threading.Lock()
        stats = {"started": 0, "codes": {}, "ttft": [], "tokens": 0, "done": 0,
                 "disconnected": 0, "mismatch": [], "errors": [], "gaps": []}
        deadline = time.monotonic() + a.duration

        def client(i):
            rng = random.Random(a.seed * 1000 + i)
            while time.monotonic() < deadline:
                with lock:
                    if stats["started"] >= a.max_requests:
                        return
                    stats["started"] += 1
                text = (rng.random() < a.text_share or not image_reqs) and text_reqs
                key, messages = rng.choice(text_reqs if text else image_reqs)
                drop = rng.random() < a.disconnect
                gaps = []
                try:
                    status, answer, ttft, tokens, gone = chat(host, port, messages, a.max_tokens,
                                                              stream=True, disconnect=drop,
                                                              gaps=gaps)
                except (OSError, http.client.HTTPException) as e:
                    with lock:
                        stats["errors"].append(f"{key}: {type(e).__name__}: {e}")
                    continue
                with lock:
                    stats["codes"][status] = stats["codes"].get(status, 0) + 1
                    if ttft is not None:
                        stats["ttft"].append(ttft)
                    stats["gaps"] += gaps
                    if gone:
                        stats["disconnected"] += 1
                    elif status == 200:
                        stats["done"] += 1
                        stats["tokens"] += tokens
                        if answer != expected[key]:
                            stats["mismatch"].append((key, answer, expected[key]))

        t0 = time.monotonic()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        for t in threads:
            t.start()
            time.sleep(0.01)  # the HTTP library's listen backlog is small: no connect burst
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        time.sleep(0.5)  # disconnected sequences leave the batch at their next step
        end = metrics(host, port)
        rss1 = rss_kib(server.proc.pid) if server else 0

        def delta(name):
            return end.get(name, 0) - base.get(name, 0)

        hist = {}
        prev = 0
        for b in range(1, 65):
            k = f'ocular_decode_batch_size_bucket{{le="{b}"}}'
            if k not in end:
                break
            cum = delta(k)
            if cum - prev:
                hist[b] = int(cum - prev)
            prev = cum
        hits, misses = delta("ocular_image_cache_hits_total"), delta("ocular_image_cache_misses_total")
        n5xx = sum(n for c, n in stats["codes"].items() if c >= 500)
        print(f"clients {a.clients}, {elapsed:.1f} s, requests {sum(stats['codes'].values())} "
              f"(completed {stats['done']}, disconnected {stats['disconnected']}), "
              f"HTTP codes {dict(sorted(stats['codes'].items()))}, client errors {len(stats['errors'])}")
        print(f"requests/s {sum(stats['codes'].values()) / elapsed:.2f}, completed/s "
              f"{stats['done'] / elapsed:.2f}, tokens/s {stats['tokens'] / elapsed:.1f} "
              f"(completed requests' tokens)")
        print(f"TTFT p50 {1000 * percentile(stats['ttft'], 0.5):.0f} ms, "
              f"p99 {1000 * percentile(stats['ttft'], 0.99):.0f} ms; between streamed pieces "
              f"p50 {1000 * percentile(stats['gaps'], 0.5):.0f} ms, "
              f"p99 {1000 * percentile(stats['gaps'], 0.99):.0f} ms, "
              f"max {1000 * max(stats['gaps'], default=0):.0f} ms")
        print(f"decode batch-size histogram (steps by batch size): {hist}")
        phases = {p: delta(f'ocular_model_seconds_total{{phase="{p}"}}')
                  for p in ("encode", "prefill", "decode")}
        busy = sum(phases.values())
        print("model time: " + ", ".join(f"{p} {v:.1f} s ({100 * v / elapsed:.0f} %)"
                                         for p, v in phases.items())
              + f", other {max(0.0, elapsed - busy):.1f} s; scheduler steps "
              f"{int(delta('ocular_scheduler_steps_total'))}, prefills "
              f"{int(delta('ocular_prefills_total'))} in "
              f"{int(delta('ocular_prefill_chunks_total'))} pieces")
        print(f"image cache: hit rate {hits / max(1, hits + misses):.3f} ({int(hits)} hits, "
              f"{int(misses)} misses), {int(end.get('ocular_image_cache_bytes', 0))} bytes")
        print(f"after: KV bytes in use {int(end.get('ocular_kv_cache_bytes_in_use', -1))}, running "
              f"{int(end.get('ocular_decode_batch_running', -1))}, waiting "
              f"{int(end.get('ocular_decode_batch_waiting', -1))}, queue "
              f"{int(end.get('ocular_queue_depth', -1))}")
        if server:
            print(f"RSS {rss0 / 1024:.1f} MiB after warm-up, {rss1 / 1024:.1f} MiB after the run "
                  f"(KV pooled for reuse {end.get('ocular_kv_cache_bytes_pooled', 0) / 2**20:.1f} MiB)")
        if n5xx:
            failures.append(f"{n5xx} responses with a 5xx status")
        if stats["errors"]:
            failures.append(f"{len(stats['errors'])} client errors, e.g. {stats['errors'][:3]}")
        if stats["mismatch"]:
            failures.append(f"{len(stats['mismatch'])} answers differ from the single-request "
                            f"answer, e.g. {stats['mismatch'][:2]}")
        if end.get("ocular_kv_cache_bytes_in_use", 1) != 0 or end.get("ocular_decode_batch_running", 1) != 0 \
                or end.get("ocular_decode_batch_waiting", 1) != 0 or end.get("ocular_queue_depth", 1) != 0:
            failures.append("KV bytes / running / waiting / queue not back to 0")
        cache_max = end.get("ocular_image_cache_max_bytes", 0)
        if end.get("ocular_image_cache_bytes", 0) > cache_max:
            failures.append("image cache over its budget")
        pooled = end.get("ocular_kv_cache_bytes_pooled", 0) / 1024
        if server and rss1 > rss0 + pooled + 64 * 1024:
            failures.append(f"RSS grew by {(rss1 - rss0) / 1024:.0f} MiB beyond the pooled KV memory")
    finally:
        if server:
            server.__exit__(None, None, None)
    return report("load_test", failures)


def report(name, failures):
    """Prints the failed checks and the verdict; the exit status."""
    for f in failures:
        print("FAIL:", f)
    print(f"{name}:", "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
