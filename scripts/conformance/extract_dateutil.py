#!/usr/bin/env python3
"""Extracts recurrence vectors from python-dateutil's own test suite.

Reads `tests/test_rrule.py` of the python-dateutil sdist and writes
tests/data/rrule/dateutil.json, the vectors tests/tests/rrule_conformance.rs
checks our expansion against. Get the sdist with

    pip download python-dateutil==2.9.0.post0 --no-binary :all: --no-deps
    tar xzf python-dateutil-2.9.0.post0.tar.gz

and run, with python-dateutil installed (it turns each `rrule(...)` call
into its RFC 5545 text; the expected instants are the test file's own
literals, never dateutil's output):

    python3 scripts/conformance/extract_dateutil.py \
        python-dateutil-2.9.0.post0/tests/test_rrule.py > tests/data/rrule/dateutil.json

A vector is a test method whose whole body is
`self.assertEqual(list(X), [datetime(...), ...])` with X an `rrule(...)` or
`rrulestr("...")` call, or an `rruleset` built from one `rrule` plus
`rdate`/`exdate` calls. All are kept, those out of our domain too: the
Rust suite, not this script, says which we refuse and why. Every other test method is listed under `skipped`
with the reason, so the counts add up to the file's. python-dateutil is
dual-licensed Apache-2.0 / BSD-3-Clause (its LICENSE); the vectors are
facts about the RFC 5545 expansion, kept with their source named.
"""

import ast
import datetime as dt
import json
import sys

from dateutil import rrule as du

# The names the test file's calls use.
NAMES = {n: getattr(du, n) for n in ("rrule", "rrulestr", "rruleset", "YEARLY", "MONTHLY", "WEEKLY",
                                      "DAILY", "HOURLY", "MINUTELY", "SECONDLY",
                                      "MO", "TU", "WE", "TH", "FR", "SA", "SU")}
NAMES.update(datetime=dt.datetime, date=dt.date)
FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")


class Skip(Exception):
    pass


def ev(node):
    """Evaluates an expression of the test file (only the names above)."""
    try:
        return eval(compile(ast.Expression(node), "<test_rrule>", "eval"), {"__builtins__": {}}, dict(NAMES))
    except Exception as e:  # a name we do not provide: not a plain vector
        raise Skip(f"not a plain expression ({type(e).__name__}: {e})")


def local(t):
    if not isinstance(t, dt.datetime):
        raise Skip("expected values are not datetimes")
    if t.tzinfo is not None:
        raise Skip("time-zone-aware datetimes (the file's own tz objects)")
    return t.isoformat()


def rule_text(r):
    """DTSTART and the RRULE value of a dateutil rrule, from its own
    serializer; a floating UNTIL is written in UTC (our series are zoned:
    RFC 5545 §3.3.10 then wants UNTIL in UTC, and the vectors run in UTC)."""
    lines = str(r).split("\n")
    start = next(l for l in lines if l.startswith("DTSTART"))
    value = next(l for l in lines if l.startswith("RRULE:"))[len("RRULE:"):]
    parts = []
    for p in value.split(";"):
        if p.startswith("UNTIL=") and "T" in p and not p.endswith("Z"):
            p += "Z"
        parts.append(p)
    if ":" not in start or ";" in start.split(":")[0]:
        raise Skip("DTSTART with parameters")
    return dt.datetime.strptime(start.split(":")[1], "%Y%m%dT%H%M%S").isoformat(), ";".join(parts)


def from_rrulestr(call):
    if call.keywords or len(call.args) != 1:
        raise Skip("rrulestr with options")
    text = ev(call.args[0])
    r = du.rrulestr(text)
    if not isinstance(r, du.rrule):
        raise Skip("rrulestr text is a set")
    return rule_text(r)


def vector(fn):
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    *setup, last = body
    call = last.value if isinstance(last, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "assertEqual"):
        raise Skip("not an assertEqual of a listing")
    got, want = call.args[:2]
    if not (isinstance(got, ast.Call) and getattr(got.func, "id", None) == "list" and len(got.args) == 1):
        raise Skip("asserts something other than list(...) (between, after, count, str, …)")
    inner = got.args[0]
    case = {"exdates": [], "rdates": []}
    if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "rrule" and not setup:
        case["dtstart"], case["rrule"] = rule_text(ev(inner))
    elif isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "rrulestr" and not setup:
        case["dtstart"], case["rrule"] = from_rrulestr(inner)
    elif isinstance(inner, ast.Name) and setup:
        set_case(setup, inner.id, case)
    else:
        raise Skip("not a listing of one rrule, rrulestr or simple rruleset")
    case["expected"] = [local(t) for t in ev(want)]
    return case


def set_case(setup, name, case):
    """`name = rruleset()` then one `name.rrule(rrule(...))` and any
    `name.rdate(datetime(...))` / `name.exdate(datetime(...))`."""
    first, *calls = setup
    if not (isinstance(first, ast.Assign) and getattr(first.targets[0], "id", None) == name
            and isinstance(first.value, ast.Call) and getattr(first.value.func, "id", None) == "rruleset"
            and not first.value.args and not first.value.keywords):
        raise Skip("set built otherwise")
    rules = 0
    for s in calls:
        c = s.value if isinstance(s, ast.Expr) else None
        if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and getattr(c.func.value, "id", None) == name and len(c.args) == 1):
            raise Skip("set built otherwise")
        kind = c.func.attr
        if kind == "rrule":
            rules += 1
            case["dtstart"], case["rrule"] = rule_text(ev(c.args[0]))
        elif kind in ("rdate", "exdate"):
            case[kind + "s"].append(local(ev(c.args[0])))
        else:
            raise Skip(f"set.{kind} (EXRULE is deprecated by RFC 5545, appendix A.3)")
    if rules != 1:
        raise Skip("a set of other than one RRULE")


def main(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    vectors, skipped = [], []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("RRuleTest", "RRuleSetTest")):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")):
            where = f"{cls.name}.{fn.name} (line {fn.lineno})"
            try:
                vectors.append({"name": where, **vector(fn)})
            except Skip as e:
                skipped.append({"name": where, "reason": str(e)})
    json.dump({
        "source": "python-dateutil 2.9.0.post0 sdist, tests/test_rrule.py (PyPI: python-dateutil)",
        "licence": "Apache-2.0 OR BSD-3-Clause (python-dateutil's LICENSE)",
        "generated_by": "scripts/conformance/extract_dateutil.py",
        "notes": "Floating (naive) times; our suite runs them in UTC. A floating UNTIL is written with Z.",
        "vectors": vectors,
        "skipped": skipped,
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")
    print(f"{len(vectors)} vectors, {len(skipped)} test methods skipped", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
