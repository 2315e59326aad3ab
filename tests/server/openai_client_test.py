"""The official `openai` Python client against `ocular serve` on the demo model.

Usage: openai_client_test.py path/to/ocular   (from the repository root)
Runs in the test venv ($OCULAR_TEST_VENV, made by scripts/test-venv with the pinned
tests/server/requirements.txt) when the running Python lacks `openai`; exits 77 (CTest:
skipped) when neither has it (no access to PyPI).
Checks: a non-streaming and a streaming chat completion with a base64 image answer what
`ocular run` answers, the boxes arrive in the `ocular` extra field, errors map to the client's
exception classes with the OpenAI code and param.
"""
import base64
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import openai
except ImportError:
    venv = os.environ.get("OCULAR_TEST_VENV", "")
    venv_python = os.path.join(venv, "bin", "python")
    if venv and os.path.exists(venv_python) and \
            os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(venv_python, [venv_python] + sys.argv)
    print("openai is not installed (scripts/test-venv could not install it): skipped")
    sys.exit(77)

OCULAR = sys.argv[1]
MODEL = "models/shapes-paligemma"
IMAGE = MODEL + "/sample.png"


def main():
    expected = subprocess.run(
        [OCULAR, "run", "-q", "--threads", "1", "-m", MODEL, "-i", IMAGE, "-p", "detect star",
         "--max-tokens", "40"], check=True, capture_output=True, text=True).stdout.rstrip("\n")
    log = tempfile.TemporaryFile(mode="w+")
    server = subprocess.Popen([OCULAR, "serve", "-m", MODEL, "--port", "0", "--threads", "1",
                               "--api-key", "sk-test"], stderr=log)
    try:
        port = None
        for _ in range(600):
            log.seek(0)
            text = log.read()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m and "ready" in text:
                port = int(m.group(1))
                break
            time.sleep(0.05)
        assert port, "the server did not start"
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test")
        url = "data:image/png;base64," + base64.b64encode(open(IMAGE, "rb").read()).decode()
        messages = [{"role": "user", "content": [{"type": "text", "text": "detect star"},
                                                 {"type": "image_url", "image_url": {"url": url}}]}]

        r = client.chat.completions.create(model="shapes-paligemma", max_tokens=40,
                                           messages=messages)
        assert r.choices[0].message.content == expected, (r.choices[0].message.content, expected)
        assert r.choices[0].finish_reason == "stop"
        boxes = r.choices[0].message.model_extra["ocular"]["detections"]
        assert boxes and boxes[0]["label"] == "star", boxes
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens

        text, usage = "", None
        for chunk in client.chat.completions.create(
                model="shapes-paligemma", max_tokens=40, messages=messages, stream=True,
                stream_options={"include_usage": True}):
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            if not chunk.choices:
                usage = chunk.usage
        assert text == expected, (text, expected)
        assert usage.completion_tokens == r.usage.completion_tokens

        assert [m.id for m in client.models.list().data] == ["shapes-paligemma"]
        try:
            client.chat.completions.create(model="shapes-paligemma", messages=[
                {"role": "user", "content": [{"type": "image_url",
                                              "image_url": {"url": "https://example.com/a.png"}}]}])
            raise AssertionError("a remote URL was accepted")
        except openai.BadRequestError as e:
            assert e.code == "remote_url_refused", e
            assert e.param == "messages[0].content[0].image_url.url", e
        try:
            openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong").models.list()
            raise AssertionError("a wrong key was accepted")
        except openai.AuthenticationError as e:
            assert e.code == "invalid_api_key", e
        print(f"ok: openai {openai.__version__}: answers equal ocular run's ({expected!r})")
    finally:
        server.terminate()
        rc = server.wait(timeout=30)
        log.seek(0)
        assert rc == 0, f"the server did not stop cleanly (exit {rc}):\n{log.read()[-4000:]}"


if __name__ == "__main__":
    main()
