#!/usr/bin/env python3
"""Structured output end to end: runs tests/structured/structured_corpus on each model and
checks every answer with Python's `jsonschema` (and `re` for the regex constraints).

usage: validate.py CORPUS_BIN OUT_DIR   (from the repository root; needs OCULAR_TEST_VENV)

Checks: every schema answer (greedy and temperature 1, fixed seeds) parses as JSON and
validates (format checks on); the json_object answer is a JSON object; where the
unconstrained greedy answer already matches a regex, the regex-constrained answer is that
same answer; every unsupported schema is refused with an error naming the keyword.
Exit 77 (skip) when the venv or jsonschema is missing.
"""
import json
import os
import re
import subprocess
import sys

MODELS = [  # (model dir, image or "-", max tokens)
    ("models/shapes-paligemma", "models/shapes-paligemma/sample.png", 96),
    ("testdata/tiny/pg2", "models/shapes-paligemma/sample.png", 96),
    ("testdata/tiny/mllama", "-", 96),
    ("testdata/tiny/gemma3-text", "-", 96),
]


def main():
    venv = os.environ.get("OCULAR_TEST_VENV", "")
    site = None
    if venv:
        for root, dirs, _ in os.walk(os.path.join(venv, "lib")):
            if root.endswith("site-packages"):
                site = root
                break
    if site:
        sys.path.insert(0, site)
    try:
        import jsonschema
    except ImportError:
        print("validate.py: jsonschema is not installed (scripts/test-venv); skipping")
        return 77
    corpus, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    failures, checked, identical = [], 0, 0
    for model, image, max_tokens in MODELS:
        out = os.path.join(out_dir, os.path.basename(model) + ".jsonl")
        subprocess.run([corpus, model, image, "testdata/structured/schemas.jsonl",
                        "testdata/structured/unsupported.jsonl", str(max_tokens), out], check=True)
        records = [json.loads(line) for line in open(out, encoding="utf-8")]
        plain = next(r for r in records if r["kind"] == "unconstrained").get("answer", "")
        for r in records:
            where = f"{model} {r.get('name', r['kind'])} T={r.get('temperature', 0)} seed={r.get('seed', 0)}"
            if r["kind"] == "unsupported":
                msg = r.get("error_message", "")
                if r["error"] not in msg:
                    failures.append(f"{where}: want an error naming {r['error']!r}, got {msg!r}")
                continue
            if "error_message" in r:
                failures.append(f"{where}: {r['error_message']}")
                continue
            answer = r["answer"]
            if r["kind"] == "regex":
                # U+FFFD: the unconstrained bytes were not UTF-8, which no regex matches.
                if "\ufffd" not in plain and re.fullmatch(r["regex"], plain):
                    identical += 1
                    if answer != plain:
                        failures.append(f"{where}: {r['regex']!r} matches the unconstrained "
                                        f"answer {plain!r}, but the constrained one is {answer!r}")
                elif not re.fullmatch(r["regex"], answer):
                    failures.append(f"{where}: {answer!r} does not match {r['regex']!r}")
                continue
            if r["kind"] == "unconstrained":
                continue
            try:
                value = json.loads(answer)
            except ValueError as e:
                failures.append(f"{where}: not JSON ({e}): {answer!r} ({r['finish_reason']})")
                continue
            checked += 1
            if r["kind"] == "json_object":
                if not isinstance(value, dict):
                    failures.append(f"{where}: not an object: {answer!r}")
                continue
            validator = jsonschema.Draft202012Validator(
                r["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            errors = list(validator.iter_errors(value))
            if errors:
                failures.append(f"{where}: {answer!r} fails the schema: {errors[0].message}")
    for f in failures:
        print("FAIL", f)
    print(f"validate.py: {checked} JSON answers validated, {identical} regex answers equal to "
          f"the unconstrained one, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
