#!/usr/bin/env python3
"""Validates generated JSON documents against a JSON Schema with an independent validator.

usage: validate_json.py SCHEMA.json DOCS.json [SCHEMA.json DOCS.json ...]

Each DOCS.json holds a JSON array of strings, each one generated document's exact text. Every
document must be strict JSON (no NaN / Infinity) and valid under the schema (the draft its
$schema names, else 2020-12), formats included. Prints one line per document ("ok" or the
error) and exits 0 iff all are valid, 1 otherwise, 2 on bad usage.

The validator is Debian's python3-jsonschema (preferred over other installs on sys.path). It
checks date, email, uuid, ipv4 and ipv6 itself; time, date-time and hostname need packages
Debian does not ship (rfc3339-validator, fqdn), so they are checked here, strictly (RFC 3339
with datetime's calendar, RFC 1123 labels). Repeated object keys are read as Python reads
them (the last one wins): a grammar cannot keep the names of additional properties distinct.
"""
import datetime
import json
import re
import sys

if "/usr/lib/python3/dist-packages" in sys.path:
    sys.path.insert(0, "/usr/lib/python3/dist-packages")
import jsonschema  # noqa: E402

_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$", re.ASCII)
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$", re.ASCII)


def _is_time(s):
    if not isinstance(s, str):
        return True
    m = _TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if h > 23 or mi > 59 or sec > 59:
        return False
    off = m.group(5)
    return off == "Z" or (int(off[1:3]) <= 23 and int(off[4:6]) <= 59)


def _is_date_time(s):
    if not isinstance(s, str):
        return True
    if "T" not in s:
        return False
    date, time = s.split("T", 1)
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date, re.ASCII):
            return False
        datetime.date.fromisoformat(date)
    except ValueError:
        return False
    return _is_time(time)


def _is_hostname(s):
    if not isinstance(s, str):
        return True
    return len(s) <= 253 and all(_LABEL.match(label) for label in s.split("."))


def _no_constants(name):
    raise ValueError("non-JSON constant " + name)


def validate(schema_path, docs_path):
    """Prints a line per document; returns how many are invalid."""
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    with open(docs_path, encoding="utf-8") as f:
        docs = json.load(f)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    checker = jsonschema.FormatChecker()
    checker.checks("time")(_is_time)
    checker.checks("date-time")(_is_date_time)
    checker.checks("hostname")(_is_hostname)
    validator = cls(schema, format_checker=checker)
    bad = 0
    for i, text in enumerate(docs):
        try:
            value = json.loads(text, parse_constant=_no_constants)
        except ValueError as e:
            print(f"{schema_path} doc {i}: not strict JSON: {e}: {text!r}")
            bad += 1
            continue
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            print(f"{schema_path} doc {i}: invalid: {errors[0].message} at "
                  f"{list(errors[0].path)}: {text!r}")
            bad += 1
        else:
            print(f"{schema_path} doc {i}: ok")
    return bad


def main(argv):
    if len(argv) < 3 or len(argv) % 2 != 1:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for i in range(1, len(argv), 2):
        bad += validate(argv[i], argv[i + 1])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
