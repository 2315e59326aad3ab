"""The Python package on the demo model (models/shapes-paligemma): the same answers as
`ocular run`, every image input kind, chat, stream, batch, errors and memory."""

import base64
import io
import os
import signal
import threading

import numpy as np
import pytest
from PIL import Image

import ocular
from conftest import IMAGE, MODEL

PROMPTS = ["caption en", "answer en how many shapes are there?", "detect star ; square ; triangle"]


@pytest.mark.parametrize("prompt", PROMPTS + ["segment star ; triangle"])
def test_generate_equals_ocular_run(model, ocular_run, prompt):
    cli = ocular_run(prompt, "-i", IMAGE, "--max-tokens", "64")
    r = model.generate(prompt, images=[IMAGE], max_tokens=64)
    assert r.text == cli["answer"]
    assert r.raw_text == cli["raw"]
    assert r.tokens == cli["output_ids"]
    assert r.prompt_tokens == cli["prompt_ids"]
    assert r.finish_reason == cli["finish_reason"]
    assert r.image_sizes == [(cli["images"][0]["width"], cli["images"][0]["height"])]
    assert len(r.detections) == len(cli["detections"])
    for got, want in zip(r.detections, cli["detections"]):
        assert got.label == want["label"]
        assert got.box.dtype == np.float32
        np.testing.assert_allclose(got.box, [want[k] for k in ("x0", "y0", "x1", "y1")], rtol=1e-6)
        if "mask" in want:
            assert got.mask.shape == tuple(want["mask"]["size"])
            assert rle(got.mask) == want["mask"]["counts"]
        else:
            assert got.mask is None
    assert r.timings.decode_tokens == cli["timings"]["decode_tokens"]


def rle(mask):
    """COCO uncompressed RLE (column-major runs, starting with 0s), as `ocular run --json`."""
    flat = mask.T.reshape(-1).astype(np.uint8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(bounds).tolist()
    return runs if flat[0] == 0 else [0] + runs


def test_segment_has_masks(model):
    r = model.generate("segment star ; triangle", images=IMAGE, max_tokens=64)
    assert r.detections and all(d.mask is not None and d.mask.any() for d in r.detections)
    assert r.detections[0].mask.shape == (r.image_sizes[0][1], r.image_sizes[0][0])
    assert len(r.detections[0].seg) == 16


def image_kinds():
    with open(IMAGE, "rb") as f:
        data = f.read()
    pil = Image.open(IMAGE)
    return {
        "path": IMAGE,
        "pathlike": __import__("pathlib").Path(IMAGE),
        "bytes": data,
        "pil": pil,
        "pil_rgba": pil.convert("RGBA"),
        "numpy": np.asarray(pil.convert("RGB")),
    }


@pytest.mark.parametrize("kind", list(image_kinds()))
def test_every_image_kind_gives_the_same_answer(model, kind):
    want = model.generate("caption en", images=[IMAGE])
    got = model.generate("caption en", images=[image_kinds()[kind]])
    assert (got.text, got.tokens) == (want.text, want.tokens)


def test_transparent_pil_images_keep_their_alpha():
    # A PIL image with alpha or a tRNS entry goes to the engine as convert("RGBA") in a PNG (the
    # family's processor decides: Llama 3.2 Vision composites onto white); others as RGB BMP.
    from ocular._images import to_engine_image

    rgba = np.zeros((6, 5, 4), dtype=np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, np.arange(30, dtype=np.uint8).reshape(6, 5) * 8
    palette = Image.fromarray(np.arange(30, dtype=np.uint8).reshape(6, 5) % 4).convert("P")
    palette.info["transparency"] = 2
    for image in (Image.fromarray(rgba), Image.fromarray(rgba).convert("LA"),
                  palette):
        data = to_engine_image(image)
        assert data.startswith(b"\x89PNG")
        got = np.asarray(Image.open(io.BytesIO(data)))
        assert np.array_equal(got, np.asarray(image.convert("RGBA")))
    assert to_engine_image(Image.fromarray(rgba[..., :3])).startswith(b"BM")
    assert to_engine_image(Image.fromarray(rgba[..., 0])).startswith(b"BM")  # "L", opaque


def test_numpy_image_pixels_reach_the_engine(model):
    # A mirrored array answers as the mirrored image (and not as the original).
    pixels = np.asarray(Image.open(IMAGE).convert("RGB"))
    flipped = pixels[:, ::-1]
    r = model.generate("detect star", images=flipped)
    mirrored = Image.open(IMAGE).convert("RGB").transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    mirrored_png = io.BytesIO()
    mirrored.save(mirrored_png, format="PNG")
    assert r.tokens == model.generate("detect star", images=mirrored_png.getvalue()).tokens
    assert r.tokens != model.generate("detect star", images=pixels).tokens


def test_text_only_prompt(model, ocular_run):
    cli = ocular_run("caption en", "--max-tokens", "8")
    assert model.generate("caption en", max_tokens=8).tokens == cli["output_ids"]


@pytest.mark.parametrize("top_k,top_p", [(3, 1.0), (0, 0.5)])
def test_sampling_options_match_cli(model, ocular_run, top_k, top_p):
    # At temperature 3 the demo model's answer depends on the seed, top_k and top_p (each of
    # these differs from the answer without the cut-off): all must reach the sampler.
    args = ["-i", IMAGE, "--temperature", "3", "--top-k", str(top_k), "--top-p", str(top_p)]
    cli = ocular_run("caption en", *args, "--seed", "7")
    r = model.generate("caption en", images=IMAGE, temperature=3, top_k=top_k, top_p=top_p, seed=7)
    assert r.tokens == cli["output_ids"]
    assert r.tokens != model.generate("caption en", images=IMAGE, temperature=3, seed=7).tokens


def test_stop_and_length(model, ocular_run):
    full = model.generate("caption en", images=IMAGE)
    word = full.text.split()[1]
    r = model.generate("caption en", images=IMAGE, stop=[word])
    assert r.finish_reason == "stop" and r.text == full.text[: full.text.index(word)]
    assert r.text == ocular_run("caption en", "-i", IMAGE, "--stop", word)["answer"]
    assert model.generate("caption en", images=IMAGE, max_tokens=2).finish_reason == "length"


def test_stream_pieces_add_up(model):
    want = model.generate("caption en", images=IMAGE)
    s = model.stream("caption en", images=IMAGE)
    pieces = list(s)
    assert len(pieces) > 1 and "".join(pieces) == want.text
    assert s.result.tokens == want.tokens


def test_stream_break_cancels(model):
    s = model.stream("caption en", images=IMAGE, max_tokens=64)
    for _ in s:
        break
    assert s.result.finish_reason == "cancelled"


def data_url(path):
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def test_chat_openai_shape(model):
    want = model.generate("caption en", images=IMAGE)
    for image_part in (
        {"type": "image_url", "image_url": {"url": data_url(IMAGE)}},
        {"type": "image_url", "image_url": {"url": Image.open(IMAGE)}},
        {"type": "image", "image": Image.open(IMAGE)},
        {"type": "image_url", "image_url": IMAGE},
    ):
        messages = [{"role": "user", "content": [image_part, {"type": "text", "text": "caption en"}]}]
        c = model.chat(messages)
        assert c["object"] == "chat.completion"
        choice = c["choices"][0]
        assert choice["message"]["role"] == "assistant"
        assert choice["message"]["content"] == want.text
        assert choice["finish_reason"] == "stop"
        assert c["usage"]["completion_tokens"] == len(want.tokens)
        assert c["usage"]["total_tokens"] == len(want.tokens) + len(want.prompt_tokens)


def test_chat_stream_chunks(model):
    want = model.generate("caption en", images=IMAGE)
    messages = [{"role": "user", "content": [{"type": "image", "image": IMAGE}, {"type": "text", "text": "caption en"}]}]
    chunks = list(model.chat(messages, stream=True))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == want.text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_chat_refuses_bad_messages(model):
    with pytest.raises(ValueError, match="no user message"):
        model.chat([{"role": "system", "content": "hi"}])
    with pytest.raises(ValueError, match="does not download"):
        model.chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}])
    with pytest.raises(ValueError, match="role"):
        model.chat([{"role": "robot", "content": "hi"}])


def test_generate_batch_equals_one_by_one(model):
    requests = [{"prompt": p, "images": [IMAGE], "max_tokens": 40} for p in PROMPTS * 3]
    want = [model.generate(r["prompt"], images=r["images"], max_tokens=40) for r in requests]
    before = model.stats()["decode_steps_by_batch"]
    got = model.generate_batch(requests)
    assert [g.tokens for g in got] == [w.tokens for w in want]
    after = model.stats()["decode_steps_by_batch"]
    assert sum(after[2:]) > sum(before[2:]), "no decode step ran more than one sequence"


def test_threads_share_one_model(model):
    want = model.generate("caption en", images=IMAGE).tokens
    got = [None] * 4

    def work(i):
        got[i] = model.generate("caption en", images=IMAGE).tokens

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want] * 4


def test_generate_batch_errors(model):
    requests = [{"prompt": "caption en", "images": [IMAGE]}, {"prompt": "caption en", "images": [b"not an image"]}]
    got = model.generate_batch(requests, return_exceptions=True)
    assert isinstance(got[0], ocular.Result)
    assert isinstance(got[1], ocular.InvalidArgumentError)
    with pytest.raises(ocular.InvalidArgumentError):
        model.generate_batch(requests)


def test_errors_carry_code_and_message(model, tmp_path):
    with pytest.raises(ocular.NotFoundError) as e:
        ocular.load(tmp_path / "missing")
    assert e.value.code == "NotFound" and e.value.exit_code == 3
    assert isinstance(e.value, FileNotFoundError)
    assert "missing" in e.value.message
    with pytest.raises(ocular.InvalidArgumentError, match=r"<bytes>: \[image\]"):
        model.generate("caption en", images=[b"not an image"])
    with pytest.raises(ocular.DataLossError) as e:
        model.generate("caption en", images=[b"\x89PNG\r\n\x1a\nbroken"])
    assert e.value.code == "DataLoss" and "truncated PNG" in e.value.message
    with pytest.raises(ocular.ResourceExhaustedError, match="over the limit"):
        small = ocular.load(MODEL, max_image_pixels=100)
        small.generate("caption en", images=np.zeros((11, 10, 3), np.uint8))
    with pytest.raises(ocular.InvalidArgumentError):
        model.generate("caption en", images=IMAGE, temperature=float("nan"))
    with pytest.raises(ValueError, match="uint8"):
        model.generate("caption en", images=np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="shape"):
        model.generate("caption en", images=np.zeros((4, 4), np.uint8))
    with pytest.raises(TypeError):
        model.generate("caption en", images=[3])
    with pytest.raises(ocular.InvalidArgumentError, match="--mmproj pairs an mmproj file"):
        ocular.load(MODEL, mmproj="x.gguf")
    # Qwen-VL's processor bounds: PaliGemma has none and refuses them, at load and per request.
    with pytest.raises(ocular.InvalidArgumentError, match="Qwen2VLImageProcessor"):
        ocular.load(MODEL, max_pixels=50176)
    with pytest.raises(ocular.InvalidArgumentError, match="Qwen2VLImageProcessor"):
        model.generate("caption en", images=IMAGE, min_pixels=3136)


PAIR = ("testdata/llamacpp/gemma3-lc-f32.gguf", "testdata/llamacpp/mmproj-gemma3-lc-f32.gguf")


def test_llamacpp_pair_equals_ocular_run(ocular_run):
    """llama.cpp's text GGUF + mmproj pair (a tiny Gemma 3, converted by llama.cpp's own
    convert_hf_to_gguf.py): the same tokens as `ocular run -m text.gguf --mmproj mmproj.gguf`."""
    m = ocular.load(PAIR[0], mmproj=PAIR[1], threads=2)
    assert "gemma3" in m.info["architecture"]
    prompt = "<start_of_image> describe"
    r = m.generate(prompt, images=[IMAGE], max_tokens=8)
    cli = ocular_run(prompt, "-i", IMAGE, "--max-tokens", "8", model=PAIR[0], mmproj=PAIR[1])
    assert r.tokens == cli["output_ids"] and r.prompt_tokens == cli["prompt_ids"]
    with pytest.raises(ocular.NotFoundError):
        ocular.load(PAIR[0], mmproj="testdata/llamacpp/missing.gguf")


SCHEMA = {
    "type": "object",
    "properties": {"shape": {"enum": ["star", "square", "triangle"]}, "count": {"type": "integer"}},
    "required": ["shape", "count"],
    "additionalProperties": False,
}


def test_structured_output_equals_ocular_run(model, ocular_run):
    import json

    r = model.generate("caption en", images=IMAGE, json_schema=SCHEMA, max_tokens=32)
    answer = json.loads(r.text)
    assert set(answer) == {"shape", "count"} and answer["shape"] in SCHEMA["properties"]["shape"]["enum"]
    assert isinstance(answer["count"], int)
    cli = ocular_run("caption en", "-i", IMAGE, "--max-tokens", "32", "--json-schema", json.dumps(SCHEMA))
    assert r.tokens == cli["output_ids"]
    assert 0 < r.timings.constraint_ms <= r.timings.decode_ms
    assert model.generate("caption en", images=IMAGE).timings.constraint_ms == 0
    # The same from a JSON string, and the regex / json_object forms.
    assert model.generate("caption en", images=IMAGE, json_schema=json.dumps(SCHEMA), max_tokens=32).tokens == r.tokens
    assert model.generate("caption en", images=IMAGE, regex="[0-9]{3}").text.isdigit()
    json.loads(model.generate("caption en", images=IMAGE, json_object=True, max_tokens=48).text)
    with pytest.raises(ocular.InvalidArgumentError, match="patternProperties"):
        model.generate("caption en", json_schema={"type": "object", "patternProperties": {"a": {}}})


def test_chat_response_format(model):
    import json

    messages = [{"role": "user", "content": [{"type": "image", "image": IMAGE}, {"type": "text", "text": "caption en"}]}]
    rf = {"type": "json_schema", "json_schema": {"name": "shape", "schema": SCHEMA, "strict": True}}
    c = model.chat(messages, response_format=rf, max_tokens=32)
    want = model.generate("caption en", images=IMAGE, json_schema=SCHEMA, max_tokens=32)
    assert c["choices"][0]["message"]["content"] == want.text
    json.loads(model.chat(messages, response_format={"type": "json_object"}, max_tokens=48)["choices"][0]["message"]["content"])
    with pytest.raises(ValueError, match="response_format"):
        model.chat(messages, response_format={"type": "grammar"})


def test_callback_exception_propagates(model):
    class Boom(Exception):
        pass

    def on_text(piece):
        raise Boom(piece)

    with pytest.raises(Boom):
        model._engine.generate([IMAGE], "caption en", None, {"max_tokens": 8}, on_text)


def test_ctrl_c_cancels(model):
    # SIGINT arrives while the engine decodes (the GIL released): KeyboardInterrupt is raised
    # from generate, and the model keeps working afterwards.
    pieces = []

    def on_text(piece):
        pieces.append(piece)
        if len(pieces) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return True

    with pytest.raises(KeyboardInterrupt):
        model._engine.generate([IMAGE], "caption en", None, {"max_tokens": 64}, on_text)
    assert len(pieces) == 2
    assert model.generate("caption en", images=IMAGE).finish_reason == "eos"


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_rss_stable_over_200_calls(model):
    pil = Image.open(IMAGE)
    for _ in range(20):  # warm up: pools, caches, allocator arenas
        model.generate("detect star", images=[pil], max_tokens=16)
    before = rss_kib()
    for i in range(200):  # both paths: boxes only, and boxes with masks
        r = model.generate("segment star" if i % 2 else "detect star", images=[pil], max_tokens=24)
        assert r.detections
    grown = rss_kib() - before
    # A leak of one decoded image (224x224 RGB, 147 KiB) or one mask per call would grow by
    # tens of MiB over 200 calls.
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB over 200 calls"
