"""Chat-template goldens: transformers' apply_chat_template (Jinja2) on a corpus of conversations.

ocular does not interpret Jinja: each family formats a conversation natively and applies it only
to the official template it recognises (src/models/chat.h). This script renders every
conversation of the corpus below with the official templates (testdata/chat/*.jinja, see
testdata/chat/README.md for where each comes from) through the tiny checkpoints' processors, and
writes testdata/chat/goldens.json: per case the conversation (as ocular's ChatMessage takes it),
the rendered text and the input_ids (or the template's error). tests/golden/chat_template_test.cc
checks that ocular's native formatting gives the same text and ids, case by case.

    .venv/bin/python -m tools.reference.make_chat_goldens
"""

import json
import os

from PIL import Image
from transformers import AutoProcessor, AutoTokenizer

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..")
CHAT = os.path.join(ROOT, "testdata", "chat")
TINY = os.path.join(ROOT, "testdata", "tiny")
DATE = "26 Jul 2024"  # the template's own default, passed as date_string (deterministic)

# template file -> (family marker used in the corpus, the checkpoints whose processor tokenizes)
TEMPLATES = {
    "gemma3-it.jinja": ("gemma3", ["gemma3", "gemma3-text"]),
    "llama-3.2-vision-instruct.jinja": ("mllama", ["mllama"]),
    "qwen2-vl-instruct.jinja": ("qwen2vl", ["qwen2vl", "qwen25vl"]),
    "qwen3-vl-instruct.jinja": ("qwen3vl", ["qwen3vl"]),
}
# Checkpoints whose image pads the processor expands per image grid (Qwen2VLProcessor): their
# ids here are the rendered text's with one <|image_pad|> per image, as ocular's
# BuildChatPrompt gives them; the expansion is checked by the model goldens' chat case
# (make_qwen2vl.py, make_qwen3vl.py).
UNEXPANDED = ("qwen2vl", "qwen25vl", "qwen3vl")


def text(t):
    return {"type": "text", "text": t}


IMG = {"type": "image"}

# (name, messages, add_generation_prompt). A message's content is a list of parts; a single
# text part is given to transformers as a plain string (both render alike, see to_hf), so both
# content forms are exercised.
CORPUS = [
    ("user_only", [{"role": "user", "content": [text("Hello there")]}], True),
    ("user_no_generation_prompt", [{"role": "user", "content": [text("Hello there")]}], False),
    ("system_user", [{"role": "system", "content": [text("You are terse.")]},
                     {"role": "user", "content": [text("Name a colour.")]}], True),
    ("system_spaces", [{"role": "system", "content": [text("  Be kind. \n")]},
                       {"role": "user", "content": [text("\t hi  \n")]}], True),
    ("multi_turn", [{"role": "user", "content": [text("What is 2+2?")]},
                    {"role": "assistant", "content": [text("4")]},
                    {"role": "user", "content": [text("And 3+3?")]}], True),
    ("system_multi_turn", [{"role": "system", "content": [text("Answer in French.")]},
                           {"role": "user", "content": [text("Hi")]},
                           {"role": "assistant", "content": [text(" Bonjour ! ")]},
                           {"role": "user", "content": [text("How are you?")]}], True),
    ("ends_with_assistant", [{"role": "user", "content": [text("Say yes")]},
                             {"role": "assistant", "content": [text("yes")]}], False),
    ("unicode_spaces", [{"role": "user", "content": [text("\u3000caf\u00e9 \u00e0 l'\u00e9cole\u00a0")]}],
     True),
    ("two_text_parts", [{"role": "user", "content": [text("first part "), text(" second")]}], True),
    ("one_image", [{"role": "user", "content": [IMG, text("Describe this image.")]}], True),
    ("image_after_text", [{"role": "user", "content": [text("Look: "), IMG, text(" what is it?")]}],
     True),
    ("two_images", [{"role": "user", "content": [IMG, IMG, text("What differs?")]}], True),
    ("image_only", [{"role": "user", "content": [IMG]}], True),
    ("images_in_turns", [{"role": "user", "content": [IMG, text("What is this?")]},
                         {"role": "assistant", "content": [text("A square.")]},
                         {"role": "user", "content": [text("And these?"), IMG, IMG]}], True),
    ("three_images_three_turns", [{"role": "user", "content": [IMG, text("one")]},
                                  {"role": "assistant", "content": [text("ok")]},
                                  {"role": "user", "content": [IMG, text("two")]},
                                  {"role": "assistant", "content": [text("ok")]},
                                  {"role": "user", "content": [IMG, text("three: compare them")]}],
     True),
    ("system_image", [{"role": "system", "content": [text("You describe images.")]},
                      {"role": "user", "content": [IMG, text("Describe.")]}], True),
    ("empty_system_image", [{"role": "system", "content": [text("")]},
                            {"role": "user", "content": [IMG, text("Describe.")]}], True),
    ("assistant_first", [{"role": "assistant", "content": [text("Hi")]},
                         {"role": "user", "content": [text("Hello")]}], True),
    ("two_users", [{"role": "user", "content": [text("a")]},
                   {"role": "user", "content": [text("b")]}], True),
    ("system_only", [{"role": "system", "content": [text("Only a system message.")]}], True),
    ("system_in_the_middle", [{"role": "user", "content": [text("a")]},
                              {"role": "system", "content": [text("Be brief.")]},
                              {"role": "user", "content": [text("b")]}], True),
]


def to_hf(messages):
    """ocular's parts -> the transformers conversation (a lone text part as a plain string)."""
    out = []
    for m in messages:
        parts = m["content"]
        if len(parts) == 1 and parts[0]["type"] == "text":
            out.append({"role": m["role"], "content": parts[0]["text"]})
        else:
            out.append({"role": m["role"], "content": [dict(p) for p in parts]})
    return out


def render(tmpl, checkpoint, messages, add_generation_prompt):
    n_images = sum(p["type"] == "image" for m in messages for p in m["content"])
    directory = os.path.join(TINY, checkpoint)
    has_vision = os.path.exists(os.path.join(directory, "preprocessor_config.json"))
    if n_images and not has_vision:
        return None  # a text-only checkpoint takes no images
    proc = AutoProcessor.from_pretrained(directory) if has_vision else None
    tok = proc.tokenizer if proc else AutoTokenizer.from_pretrained(directory)
    try:
        # ProcessorMixin.apply_chat_template(tokenize=True) as transformers 4.57 runs it: render,
        # then the processor on the text (add_special_tokens=False when it starts with bos), the
        # images in order. (Called in two steps because its tokenize path cannot take a plain
        # string content.)
        owner = proc or tok
        owner.chat_template = tmpl
        rendered = owner.apply_chat_template(to_hf(messages), tokenize=False,
                                             add_generation_prompt=add_generation_prompt,
                                             date_string=DATE)
    except Exception as e:  # the template's raise_exception (TemplateError)
        return {"error": str(e)}
    special = not (tok.bos_token and rendered.startswith(tok.bos_token))
    if proc and checkpoint in UNEXPANDED:
        ids = tok(rendered, add_special_tokens=special)["input_ids"]
    elif proc:
        size = proc.image_processor.size
        side = size.get("height", size.get("shortest_edge", 32))
        images = [Image.new("RGB", (side, side), (200, 30, 30)) for _ in range(n_images)]
        ids = proc(text=rendered, images=images or None, add_special_tokens=special)["input_ids"]
        ids = ids[0]
    else:
        ids = tok(rendered, add_special_tokens=special)["input_ids"]
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    return {"text": rendered, "ids": [int(i) for i in ids]}


def main():
    cases = []
    for name, (family, checkpoints) in TEMPLATES.items():
        with open(os.path.join(CHAT, name), newline="") as f:
            tmpl = f.read()
        for checkpoint in checkpoints:
            for case, messages, add_generation_prompt in CORPUS:
                expected = render(tmpl, checkpoint, messages, add_generation_prompt)
                if expected is None:
                    continue
                cases.append({"template": name, "family": family, "checkpoint": checkpoint,
                              "case": case, "messages": messages,
                              "add_generation_prompt": add_generation_prompt, "date": DATE,
                              **expected})
    out = os.path.join(CHAT, "goldens.json")
    with open(out, "w") as f:
        json.dump({"generator": "tools/reference/make_chat_goldens.py", "cases": cases}, f,
                  indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    print(f"wrote {out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
