"""Differential sweep: ocular's Jinja renderer against Python jinja2 (as transformers renders).

Templates: every file of llama.cpp's models/templates/ as shipped in the llama-cpp-python sdist
(downloaded with pip into .cache/, read from the tarball, never committed), plus the templates
of the families ocular supports (testdata/chat/*.jinja and the tiny checkpoints'
tokenizer_config.json). Each is rendered on every conversation of tools/reference/jinja_env.py's
corpus by jinja2 (jinja_env.render) and by build/tools/jinja_render/jinja_render, and the
outcomes compared:

  identical  both rendered, byte for byte the same text
  both_fail  jinja2 raised and ocular returned an error too (not kUnimplemented)
  refused    ocular refused a construct it does not implement (kUnimplemented; named)
  mismatch   anything else (a different text, or one side failed)

    python3 -m tools.reference.jinja_sweep [--build build] [--show-mismatches]

Prints the figures docs/chat.md quotes. Needs jinja2 (tools/reference/requirements.txt pins
it) and pip; nothing else from the reference stack.
"""

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tarfile

import jinja2

from tools.reference import jinja_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LLAMA_CPP_PYTHON = "0.3.36"  # its sdist vendors llama.cpp, models/templates/ included
JINJA2 = "3.1.6"


def sdist_path():
    cache = os.path.join(ROOT, ".cache", "llama-cpp-python")
    path = os.path.join(cache, f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                        "--no-deps", f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", cache],
                       check=True)
    return path


def llama_cpp_templates():
    out = {}
    with tarfile.open(sdist_path()) as tar:
        for m in tar.getmembers():
            if "/vendor/llama.cpp/models/templates/" in m.name and m.name.endswith(".jinja"):
                name = "llama.cpp/" + os.path.basename(m.name)
                out[name] = tar.extractfile(m).read().decode("utf-8")
    return out


def family_templates():
    out = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "testdata", "chat", "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            out["ocular/" + os.path.basename(path)] = f.read()
    for path in sorted(glob.glob(os.path.join(ROOT, "testdata", "tiny", "*", "*.json")) +
                       glob.glob(os.path.join(ROOT, "testdata", "tiny", "*", "*.jinja"))):
        name = "ocular/" + os.path.relpath(path, os.path.join(ROOT, "testdata"))
        if path.endswith(".jinja"):
            with open(path, encoding="utf-8") as f:
                out[name] = f.read()
            continue
        if not path.endswith(("tokenizer_config.json", "chat_template.json")):
            continue
        with open(path, encoding="utf-8") as f:
            t = json.load(f).get("chat_template")
        if isinstance(t, str):
            out[name] = t
    return out


def cases(templates):
    for tname, source in sorted(templates.items()):
        compiled = None
        try:
            compiled = jinja_env.compile_template(source)
        except jinja2.TemplateError as e:
            compiled = e
        for cname, context in jinja_env.conversations():
            if isinstance(compiled, Exception):
                ref = ("error", f"{type(compiled).__name__}: {compiled}")
            else:
                ref = jinja_env.render(compiled, context)
            yield tname, cname, source, context, ref


def run_ocular(binary, items):
    lines = [json.dumps({"name": t, "template": s, "context": c, "now": jinja_env.NOW},
                        ensure_ascii=False) for t, _, s, c, _ in items]
    proc = subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def classify(ref, ours):
    if ours["ok"]:
        if ref[0] == "ok" and ref[1] == ours["text"]:
            return "identical"
        return "mismatch"
    if ours["code"] == "Unimplemented":
        return "refused"
    return "both_fail" if ref[0] == "error" else "mismatch"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--show-mismatches", action="store_true")
    ap.add_argument("--only", default="", help="templates whose name contains this")
    args = ap.parse_args()
    if jinja2.__version__ != JINJA2:
        sys.exit(f"jinja_sweep: needs jinja2=={JINJA2} (found {jinja2.__version__})")
    templates = {**llama_cpp_templates(), **family_templates()}
    templates = {k: v for k, v in templates.items() if args.only in k}
    items = list(cases(templates))
    results = run_ocular(os.path.join(args.build, "tools", "jinja_render", "jinja_render"), items)
    counts = collections.Counter()
    per_template = collections.defaultdict(collections.Counter)
    refusals = collections.Counter()
    for (tname, cname, _, _, ref), ours in zip(items, results):
        kind = classify(ref, ours)
        counts[kind] += 1
        per_template[tname][kind] += 1
        if kind == "refused":
            msg = ours["error"]
            refusals[msg[msg.find("unsupported construct"):]] += 1
        if kind == "mismatch" and args.show_mismatches:
            print(f"--- {tname} {cname}\n  jinja2: {ref!r:.600}\n  ocular: {ours!r:.600}")
    total = sum(counts.values())
    rendered = sum(1 for _, _, _, _, ref in items if ref[0] == "ok")
    print(f"templates: {len(templates)}, conversations: {total // max(len(templates), 1)}, "
          f"cases: {total}")
    print(f"byte-identical renders: {counts['identical']}/{rendered} that jinja2 renders "
          f"({counts['identical']}/{total} of all cases); both fail: {counts['both_fail']}; "
          f"refused: {counts['refused']}; mismatches: {counts['mismatch']}")
    clean = [t for t, c in per_template.items() if c["mismatch"] == 0 and c["refused"] == 0]
    print(f"templates with every case identical or failing in both: {len(clean)}/{len(templates)}")
    for msg, n in refusals.most_common():
        print(f"  refused ({n} cases): {msg}")
    for t, c in sorted(per_template.items()):
        if c["mismatch"] or c["refused"]:
            print(f"  {t}: {dict(c)}")
    return 1 if counts["mismatch"] else 0


if __name__ == "__main__":
    sys.exit(main())
