"""Fixtures for src/text/jinja/jinja_test.cc: Python jinja2's renders, as transformers renders.

Writes testdata/chat/jinja_cases.json: small templates that exercise each construct the
renderer implements (whitespace control, loops, macros, namespaces, filters, tests, methods,
tojson, slicing, Unicode, errors), and the family templates (testdata/chat/*.jinja) on part of
the sweep's corpus (tools/reference/jinja_env.py). Per case: the template (inline, or the file
it comes from), the context, and jinja2's text or the fact that it raised. The full sweep over
llama.cpp's templates is tools/reference/jinja_sweep.py.

    python3 -m tools.reference.make_jinja_fixtures
"""

import json
import os

from tools.reference import jinja_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(ROOT, "testdata", "chat", "jinja_cases.json")

MSGS = [{"role": "system", "content": "  Be terse.\n"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "caf\u00e9 \U0001f642"}]},
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": "Tell me {{ more }}"}]
CTX = {"messages": MSGS, "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True,
       "tools": None, "documents": None, "n": 7, "f": 2.5, "name": "Ada", "empty": "",
       "items": [3, 1, 2], "d": {"b": 1, "a": [1, 2], "c": {"x": None, "y": True}},
       "words": ["Apple", "banana", "cherry", "apple"]}

# (name, template): every case renders with CTX.
TEMPLATES = [
    ("text_only", "Hello\nworld\n"),
    ("trailing_newlines", "a\n\n"),
    ("crlf", "a\r\nb{% if true %}\r\nc{% endif %}\r\n"),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter"),
    ("lstrip_blocks", "line\n    {% if true %}\n    x\n    {% endif %}\nend"),
    ("lstrip_not_after_text", "a  {% if true %}b{% endif %}"),
    ("minus_strip", "a  \n  {{- 'b' -}}  \n  c {%- if true -%}  d  {%- endif -%} e"),
    ("plus_keeps", "x\n  {%+ if true +%}\ny{% endif %}"),
    ("comments", "a {# note #} b\n  {# line #}\nc{#- x -#}  d"),
    ("raw", "{% raw %}{{ not parsed }} {% if %}{% endraw %}!"),
    ("loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}"
                  "{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }};{% endfor %}"),
    ("loop_filter_else", "{% for i in items if i > 1 %}{{ i }}{{ loop.index }}{% else %}none"
                         "{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}"),
    ("loop_controls", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                      "{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
    ("loop_scope", "{% set x = 1 %}{% for i in items %}{% set x = i %}{% endfor %}{{ x }}"),
    ("namespace", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}"
                  "{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}"
                  "{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}"),
    ("unpack", "{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% set a, b = 1, 2 %}{{ b }}"),
    ("macro", "{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}"
              "{{ greet(name) }} {{ greet('Bo', punct='?') }}"),
    ("set_block", "{% set body %}  x {{ n }} {% endset %}[{{ body }}]{% set t | trim %} y {% endset %}[{{ t }}]"),
    ("filter_block", "{% filter upper %}abc {{ name }}{% endfilter %}"),
    ("generation", "{% generation %}gen {{ n }}{% endgeneration %}"),
    ("arith", "{{ n + 1 }} {{ n - 10 }} {{ n * 2 }} {{ n / 2 }} {{ n // 2 }} {{ -n // 2 }} {{ n % 3 }}"
              " {{ -7 % 3 }} {{ 2 ** 10 }} {{ f * 2 }} {{ 1 / 3 }} {{ 1e20 }} {{ 0.0001 }} {{ 1e-5 }}"),
    ("compare", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ n != 7 }}"
                " {{ 'x' in 'xyz' }} {{ 2 not in items }} {{ 'a' in d }} {{ true == 1 }}"),
    ("logic", "{{ none or 'default' }} {{ 0 and 1 }} {{ not empty }} {{ 'y' if n > 5 else 'n' }}"
              "{{ 'z' if false }}|"),
    ("concat", "{{ 'a' ~ n ~ none ~ true }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 3 }}"),
    ("print_values", "{{ none }} {{ true }} {{ items }} {{ d }} {{ (1, 'a') }} {{ undefined_var }}"
                     " {{ ['it\\'s', \"q\\\"\", 'tab\\t'] }} {{ 3.0 }} {{ [1.5, none] }}"),
    ("string_literals", "{{ 'a\\nb' }} {{ \"\\u00e9\\x41\\\\\" }} {{ 'x' 'y' }} {{ '\\q' }}"),
    ("slicing", "{{ name[0] }}{{ name[-1] }} {{ name[1:] }} {{ name[::-1] }} {{ items[1:] }}"
                " {{ items[:-1] }} {{ items[::2] }} {{ messages[-1].role }} {{ 'caf\u00e9'[3] }}"),
    ("attr_item", "{{ d.a }} {{ d['b'] }} {{ d.c.x }} {{ d.missing }}|{{ messages[0]['role'] }}"
                  " {{ items.0 }} {{ d.get('b') }} {{ d.get('zz', 5) }}"),
    ("str_methods", "{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}"
                    "|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a.b.c'.rsplit('.', 1) }}"
                    "|{{ name.startswith('A') }}{{ name.endswith(('x', 'a')) }}|{{ name.upper() }}"
                    "{{ name.lower() }}|{{ 'hello world'.title() }}|{{ 'aXb'.capitalize() }}"
                    "|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}"
                    "{{ 'abcb'.count('b') }}|{{ '-'.join(['a', 'b']) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}"
                    "|{{ '12'.isdigit() }}{{ ' '.isspace() }}|{{ 'pre_x'.removeprefix('pre_') }}"
                    "|{{ '{} and {}'.format(1, 'b') }}|{{ '{0}{name}'.format('x', name='y') }}"),
    ("filters_text", "{{ '  pad \\n'|trim }}|{{ name|upper }}{{ name|lower }}|{{ 'ab cd'|title }}"
                     "|{{ 'aB'|capitalize }}|{{ 'a-b'|replace('-', '+') }}|{{ name|length }}"
                     "|{{ 'caf\u00e9'|length }}|{{ '<a & b>'|e }}|{{ n|string }}|{{ 'x'|safe }}"
                     "|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, first=true) }}"
                     "|{{ 'a\\n\\nb'|indent('> ', blank=true) }}"),
    ("filters_seq", "{{ items|sort }} {{ items|sort(reverse=true) }} {{ words|sort }}"
                    " {{ words|unique|list }} {{ items|first }}{{ items|last }} {{ items|min }}"
                    "{{ items|max }} {{ items|sum }} {{ items|reverse|list }} {{ items|join(', ') }}"
                    " {{ items|length }} {{ items|list }} {{ 'abc'|list }} {{ d|list }}"
                    " {{ d|dictsort }} {{ words|map('upper')|join }} {{ [1, 2]|map('string')|list }}"),
    ("filters_select", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
                       " {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|join(',') }}"
                       " {{ items|select('odd')|list }} {{ items|reject('even')|list }}"
                       " {{ [0, 1, '', 'a']|select|list }} {{ none|selectattr('x')|list }}"
                       " {{ messages|map(attribute='nope', default='-')|list }}"
                       " {{ messages|selectattr('role', 'in', ['system'])|first|attr('role') }}"),
    ("filters_default", "{{ missing|default('dflt') }} {{ empty|default('e', true) }}"
                        " {{ empty|d('kept') }}| {{ none|default('n') }} {{ missing is defined }}"),
    ("filters_numbers", "{{ '42'|int }} {{ 'x'|int }} {{ 'x'|int(3) }} {{ '2.5'|float }} {{ 3|float }}"
                        " {{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.7|round(method='floor') }}"
                        " {{ 2.5|int }}"),
    ("items_filter", "{% for k, v in d|items %}{{ k }}{% endfor %} {{ d|items|list|length }}"),
    ("tojson", "{{ d|tojson }}|{{ messages[1]|tojson }}|{{ items|tojson(indent=2) }}"
               "|{{ d|tojson(indent=4) }}|{{ d|tojson(separators=(',', ':')) }}"
               "|{{ {'z': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ 'caf\u00e9 \"q\" \\n'|tojson }}"
               "|{{ [1.0, 2.5, none, true]|tojson }}|{{ {}|tojson }}{{ []|tojson(indent=2) }}"
               "|{{ 'caf\u00e9'|tojson(ensure_ascii=true) }}"),
    ("tests", "{{ n is number }}{{ n is integer }}{{ f is float }}{{ name is string }}"
              "{{ d is mapping }}{{ items is sequence }}{{ items is iterable }}{{ none is none }}"
              "{{ true is boolean }}{{ n is odd }}{{ n is even }}{{ n is divisibleby 7 }}"
              "{{ n is eq 7 }}{{ n is gt 3 }}{{ 'x' is in 'xy' }}{{ name is not defined }}"
              "{{ missing is undefined }}{{ true is true }}{{ 'ab' is lower }}{{ range is callable }}"),
    ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1, b=2) }}"
                " {{ strftime_now('%Y-%m-%d') }} {{ bos_token }}{{ eos_token }}"),
    ("generators", "{{ items|map('string')|first }} {% set g = items|select('odd') %}"
                   "{% for x in g %}{{ x }}{% endfor %}|{% for x in g %}{{ x }}{% endfor %}|"
                   "{{ 'yes' if [0]|select else 'no' }}"),
    ("markup", "{{ 'a'|safe + '<b>' }} {{ '<c>' + 'd'|safe }} {{ ('x'|safe + '&') + '\"' }}"),
    ("dict_views", "{{ d.keys()|list }} {{ d.values()|list|length }} {{ d.items()|length }}"
                   " {{ d.keys() }}"),
    ("chat_like", "{{ bos_token }}{% for m in messages %}{% if m.content is string %}"
                  "{{ '<' + m.role + '>' + m.content|trim + '\\n' }}{% else %}"
                  "{% for p in m.content %}{% if p.type == 'image' %}<img>{% else %}{{ p.text }}"
                  "{% endif %}{% endfor %}\n{% endif %}{% endfor %}"
                  "{% if add_generation_prompt %}<assistant>{% endif %}"),
    # Failures: jinja2 raises on each, so must ocular (kInvalidArgument, kDataLoss).
    ("raise", "{{ raise_exception('bad turn ' ~ n) }}"),
    ("undefined_attr", "{{ missing.attr }}"),
    ("type_error", "{{ 'a' + 1 }}"),
    ("sandbox_append", "{% set l = [] %}{{ l.append(1) }}"),
    ("json_undefined", "{{ missing|tojson }}"),
    ("generator_length", "{{ (items|select)|length }}"),
    ("syntax_error", "{% if x %}no end"),
    ("unknown_tag", "{% frobnicate %}"),
    ("unknown_filter", "{{ x|frobnicate }}"),
    ("range_too_big", "{{ range(200000)|length }}"),
]


def main():
    cases = []
    for name, source in TEMPLATES:
        status, text = jinja_env.render(jinja_env.compile_template_or_error(source), CTX)
        cases.append({"name": name, "template": source, "context": CTX,
                      "ok": status == "ok", "text": text if status == "ok" else None,
                      "error": text if status != "ok" else None})
    chat = os.path.join(ROOT, "testdata", "chat")
    convs = dict(jinja_env.conversations())
    for fname in sorted(os.listdir(chat)):
        if not fname.endswith(".jinja"):
            continue
        with open(os.path.join(chat, fname), encoding="utf-8") as f:
            source = f.read()
        compiled = jinja_env.compile_template_or_error(source)
        for cname in ["system_multi_turn/gen=1", "parts_multi_turn/gen=1", "parts_interleaved/gen=0",
                      "unicode/gen=1", "whitespace/gen=1", "empty_content/gen=1", "ends_with_assistant/gen=0",
                      "tool_call/gen=1", "kwargs/gen=1"]:
            status, text = jinja_env.render(compiled, convs[cname])
            cases.append({"name": f"{fname}:{cname}", "template_file": f"testdata/chat/{fname}",
                          "context": convs[cname], "ok": status == "ok",
                          "text": text if status == "ok" else None,
                          "error": text if status != "ok" else None})
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"now": jinja_env.NOW, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
