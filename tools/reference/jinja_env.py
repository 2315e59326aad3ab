"""The Jinja environment transformers 4.57.1 renders chat templates in, and the conversation corpus.

transformers' apply_chat_template (utils/chat_template_utils.py, _compile_jinja_template and
render_jinja_template) renders with jinja2's ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) plus the loopcontrols extension and a `{% generation %}` block; it replaces
the `tojson` filter with json.dumps(x, ensure_ascii=False, indent=..., separators=...,
sort_keys=...), adds the globals raise_exception (raises TemplateError) and strftime_now
(datetime.now().strftime), and renders with messages=, tools=, documents=,
add_generation_prompt= and the tokenizer's special tokens map plus any extra kwargs. When
transformers is importable this module uses its own compiler; otherwise it builds the same
environment (the settings above). strftime_now is pinned to NOW so renders are deterministic.
"""

import json
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1721995200  # 2024-07-26 12:00:00 UTC: strftime_now formats this instant (local time:
# the same date in every time zone within 12 hours of UTC)


class _Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers' AssistantTracker
    only records where the body lands, which apply_chat_template's text does not show)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.fromtimestamp(NOW).strftime(fmt)


def compile_template(source):
    try:  # transformers' own environment, when the reference venv has it
        from transformers.utils import chat_template_utils as ctu
        ctu._compile_jinja_template.cache_clear()
        template = ctu._compile_jinja_template(source)
        template.globals["strftime_now"] = _strftime_now
        return template
    except ImportError:
        pass
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def compile_template_or_error(source):
    """The compiled template, or the exception jinja2 raised compiling it."""
    try:
        return compile_template(source)
    except jinja2.TemplateError as e:
        return e


def render(template, context):
    """("ok", text) or ("error", message), as apply_chat_template would return or raise."""
    if isinstance(template, Exception):
        return "error", f"{type(template).__name__}: {template}"
    try:
        return "ok", template.render(**context)
    except Exception as e:  # noqa: BLE001 - every exception is an outcome to compare
        return "error", f"{type(e).__name__}: {e}"


# ---- the corpus ----

SPECIAL = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "unk_token": "<|unk|>",
           "pad_token": "<|pad|>"}


def _text(t):
    return {"type": "text", "text": t}


IMG = {"type": "image"}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather at a place, now.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}]
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}


def conversations():
    """(name, context) pairs: every conversation shape the corpus covers."""
    sys_ = {"role": "system", "content": "You are a helpful assistant."}
    u1 = {"role": "user", "content": "Hello!"}
    a1 = {"role": "assistant", "content": "Hi, how can I help?"}
    u2 = {"role": "user", "content": "What is 2+2?"}
    cases = [
        ("user", [u1]),
        ("system_user", [sys_, u1]),
        ("multi_turn", [u1, a1, u2]),
        ("system_multi_turn", [sys_, u1, a1, u2]),
        ("ends_with_assistant", [u1, a1]),
        ("unicode", [{"role": "user", "content": "caf\u00e9 \u4e16\u754c \U0001f642 \u00a0x\u3000"}]),
        ("whitespace", [{"role": "system", "content": "  Be terse. \n"},
                        {"role": "user", "content": "\t hi  \n\n"}]),
        ("empty_content", [{"role": "user", "content": ""}]),
        ("quotes_and_braces", [{"role": "user", "content": "say \"{{ x }}\" and '{% y %}' \\n"}]),
        ("parts_text", [{"role": "user", "content": [_text("Describe it.")]}]),
        ("parts_image_text", [{"role": "user", "content": [IMG, _text("Describe it.")]}]),
        ("parts_text_image", [{"role": "user", "content": [_text("Look:"), IMG]}]),
        ("parts_interleaved", [{"role": "user", "content": [_text("A"), IMG, _text("B"), IMG]}]),
        ("parts_multi_turn", [{"role": "system", "content": [_text("Be brief.")]},
                              {"role": "user", "content": [IMG, _text("What is it?")]},
                              {"role": "assistant", "content": [_text("A cat.")]},
                              {"role": "user", "content": [_text("And this?"), IMG]}]),
        ("tool_call", [u1, {"role": "assistant", "content": "", "tool_calls": [CALL]},
                       {"role": "tool", "content": "{\"temperature\": 21}", "name": "get_weather",
                        "tool_call_id": "call_1"}]),
    ]
    for name, messages in cases:
        for gen in (False, True):
            yield f"{name}/gen={int(gen)}", {**SPECIAL, "messages": messages, "tools": None,
                                            "documents": None, "add_generation_prompt": gen}
    yield "tools/gen=1", {**SPECIAL, "messages": [sys_, u1], "tools": TOOLS, "documents": None,
                          "add_generation_prompt": True}
    yield "tools_call/gen=1", {**SPECIAL, "tools": TOOLS, "documents": None,
                               "add_generation_prompt": True,
                               "messages": [u1, {"role": "assistant", "content": None,
                                                 "tool_calls": [CALL]},
                                            {"role": "tool", "content": "21 C",
                                             "tool_call_id": "call_1"}]}
    yield "documents/gen=1", {**SPECIAL, "messages": [u1], "tools": None,
                              "documents": [{"title": "Doc", "text": "Some text."}],
                              "add_generation_prompt": True}
    yield "kwargs/gen=1", {**SPECIAL, "messages": [sys_, u1], "tools": None, "documents": None,
                           "add_generation_prompt": True, "enable_thinking": False,
                           "date_string": "26 Jul 2024"}
