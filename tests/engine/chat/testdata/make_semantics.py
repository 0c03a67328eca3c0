#!/usr/bin/python3
"""Writes semantics.json: small templates exercising one Jinja feature each, and what Python
jinja2 renders for them with Hugging Face's settings (the environment of
shared/chat-templates/render_expected.py). chat_template_test.cc renders each and compares.

usage: make_semantics.py CHAT_TEMPLATES_DIR > semantics.json   (Debian: apt-get install python3-jinja2)
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import render_expected  # noqa: E402  (compile_template: HF's sandboxed environment)

import json
CASES = [
 ("whitespace control", "A  {%- if true -%}  B  {%- endif -%}  C\n  {{- 'D' -}}  \nE", {}),
 ("trim_blocks and lstrip_blocks", "<ul>\n    {% for x in xs %}\n    <li>{{ x }}</li>\n    {% endfor %}\n</ul>\n", {"xs": [1, 2]}),
 ("plus sign keeps whitespace", "a\n    {%+ if true %}b{% endif +%}\nc", {}),
 ("comments and raw", "x{# note #}\n  {# c2 #}\ny{% raw %}{{ not evaluated }}{% endraw %}z", {}),
 ("loop variables", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('a','b') }};{% endfor %}", {"xs": ["p", "q", "r"]}),
 ("loop filter and else", "{% for x in xs if x > 1 %}{{ x }}{{ loop.last }}{% else %}none{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}", {"xs": [1, 2, 3]}),
 ("break and continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
 ("scoping and namespace", "{% set x = 1 %}{% set ns = namespace(y=0) %}{% for i in range(3) %}{% set x = x + i %}{% set ns.y = ns.y + i %}{% endfor %}{{ x }} {{ ns.y }}", {}),
 ("macros with defaults and recursion", "{% macro f(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ f(1) }}{{ f(1, 2) }}{{ f(1, c=3) }}{{ fact(4) }}", {}),
 ("call block and caller", "{% macro box() %}<{{ caller() }}>{% endmacro %}{% call box() %}inside{% endcall %}", {}),
 ("set block and filter block", "{% set t %}  hello {{ 'x' }}  {% endset %}[{{ t | trim }}]{% filter upper %}abc{% endfilter %}", {}),
 ("python repr when printing", "{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }} {{ ('t',) }} {{ none }} {{ 2.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ \"it's\" }}|{{ [\"it's\"] }}", {}),
 ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'ab' * 3 }} {{ 1 + 2.5 }} {{ true + 1 }} {{ 'a' ~ 1 ~ none }}", {}),
 ("comparisons and membership", "{{ 1 < 2 < 3 }} {{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1, 2] < [1, 3] }}", {}),
 ("undefined and none", "[{{ missing }}][{{ missing | default('d') }}][{{ none | default('d') }}][{{ '' | default('e', true) }}][{{ missing is defined }}][{{ d.nope }}][{{ none is none }}][{{ missing | length }}][{% for x in missing %}x{% endfor %}]", {"d": {"a": 1}}),
 ("string methods", "{{ '  ab  '.strip() }}|{{ 'xxabxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'Hello World'.lower() }}{{ 'hi there'.title() }}{{ 'hELLO'.capitalize() }}|{{ 'abcabc'.find('c') }}{{ 'abcabc'.count('b') }}|{{ '{}-{}'.format(1, 'x') }}|{{ '-'.join(['a', 'b']) }}", {}),
 ("slicing", "{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1, 2, 3, 4][1:] }} {{ [1, 2, 3, 4][-2:] }} {{ [1, 2, 3, 4][::2] }} {{ 'héllo'[1] }} {{ 'héllo' | length }}", {}),
 ("filters on lists", "{{ xs | map(attribute='n') | join(',') }} {{ xs | selectattr('n', 'gt', 1) | map(attribute='n') | list }} {{ xs | rejectattr('n', 'equalto', 2) | list | length }} {{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [1, 2, 2, 3] | unique | list }} {{ [1, 5, 3] | max }} {{ [1, 5, 3] | min }} {{ [1, 2, 3] | sum }} {{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }} {{ [1, 2] | reverse | list }} {{ ['a', 'b'] | map('upper') | list }} {{ [0, 1, '', 'x'] | select | list }}", {"xs": [{"n": 1}, {"n": 2}, {"n": 3}]}),
 ("filters on strings and numbers", "{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'x y z' | wordcount }}|{{ '42' | int + 1 }}|{{ 'x' | int }}|{{ '2.5' | float }}|{{ -3 | abs }}|{{ 2.567 | round(2) }}|{{ 'abc' | upper }}|{{ 'a<b' | e }}|{{ 'abc' | replace('b', 'B') }}|{{ 'x' | center(5) }}|{{ {'b': 1, 'A': 2} | dictsort }}|{{ {'a': 1} | items | list }}", {}),
 ("tojson as transformers defines it", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ d | tojson(sort_keys=true) }}|{{ [1.0, none, true] | tojson(separators=(',', ':')) }}", {"d": {"z": [1, {"y": "\u00e9\n"}], "a": None, "b": 1.5, "e": [], "f": {}}}),
 ("tests", "{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ [] is sequence }}{{ true is boolean }}{{ 2 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ x is sameas none }}{{ 1 is eq 1 }}{{ 2 is in [1, 2] }}{{ true is true }}{{ 1 is not string }}", {"x": None}),
 ("dict methods", "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys() | list }} {{ d['a'] }} {{ d.a }}", {"d": {"a": 1, "b": 2}}),
 ("conditional expression and inline if", "{{ 'y' if true else 'n' }}{{ 'y' if false }}{{ 'y' if false else 'n' }}", {}),
 ("string escapes in literals", "{{ 'a\\tb\\u00e9\\x41' }}|{{ \"q\\\"q\" }}|{{ 'a' 'b' }}", {}),
 ("markup plus string escapes", "{{ 'x' | safe + '<y>' }}|{{ '<y>' ~ 'x' | safe }}", {}),
 ("generators are not lists", "{{ (xs | map('upper')) is sequence }} {{ [] | select | list | length }} {% if [] | select %}truthy{% endif %}", {"xs": ["a"]}),
]

out = []
for name, tmpl, variables in CASES:
    case = {"name": name, "template": tmpl, "vars": variables}
    try:
        case["expected"] = render_expected.compile_template(tmpl).render(**variables)
    except Exception as e:  # noqa: BLE001
        case["error"] = f"{type(e).__name__}: {e}"
    out.append(case)
json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
