"""Argument checks shared by the library: bad input raises ValueError naming the field or argument.

Every public function of the course modules, the importers (config.json, GGUF) and the app checks its inputs
with these, so one rule holds everywhere: for input it cannot use, the library raises ValueError (nothing
else), and the message starts with the name of the field or argument, then says what is allowed and what it
got. `brief()` shows the value it got safely, however hostile: a 10**5000 integer, a megabyte string, a
nested list, or an object whose repr() fails are all shown in a few dozen characters.

This module imports nothing of ours: the course modules and everything above them use it.
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real


def check(cond: bool, arg: str, msg: str) -> None:
    """ValueError("arg: msg") unless cond."""
    if not cond:
        raise ValueError(f"{arg}: {msg}")


def brief(value, limit: int = 40) -> str:
    """A short, safe description of a value for an error message."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, Integral):
        v = int(value)
        if v.bit_length() > 64:  # repr() of a 5,000-digit integer raises (Python's int-to-str digit limit)
            return f"an integer of about {int(v.bit_length() * 0.30103) + 1:,} digits"
        return repr(v)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[:limit] + "…") + (
            f" ({len(value):,} characters)" if len(value) > limit else ""
        )
    if isinstance(value, (list, tuple)):
        kind = type(value).__name__
        return f"a {kind} of {len(value):,} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return f"a dict of {len(value):,} key{'' if len(value) == 1 else 's'}"
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else f"a {type(value).__name__}"


def is_int(value) -> bool:
    """An integer, and not a bool (True is an int in Python, never a count here)."""
    t = type(value)
    if t is int:  # the common case, without the Integral ABC's slower check
        return True
    return t is not bool and isinstance(value, Integral)


def check_int(value, arg: str, lo: int, hi: int | None = None) -> int:
    """value as an int, if it is an integer from lo to hi (hi None: no upper bound)."""
    ok = is_int(value) and lo <= value and (hi is None or value <= hi)
    if not ok:
        rng = f"from {lo:,} to {hi:,}" if hi is not None else f">= {lo:,}"
        check(False, arg, f"must be an integer {rng}, got {brief(value)}")
    return int(value)


def check_number(value, arg: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """value as a float, if it is a finite real number in [lo, hi] ((lo, hi] with lo_open)."""
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if ok:
        try:
            f = float(value)
        except (OverflowError, ValueError, TypeError):
            ok = False
        else:
            ok = math.isfinite(f) and (lo < f if lo_open else lo <= f) and f <= hi
    if not ok:
        low = f"> {lo:g}" if lo_open else f">= {lo:g}"
        check(False, arg, f"must be a finite number {low} and <= {hi:g}, got {brief(value)}")
    return f


def check_bool(value, arg: str) -> bool:
    if not (isinstance(value, bool)):
        check(False, arg, f"must be True or False, got {brief(value)}")
    return value


def check_text(value, arg: str, max_chars: int) -> str:
    if not (isinstance(value, str)):
        check(False, arg, f"must be a string, got {brief(value)}")
    if not (len(value) <= max_chars):
        check(False, arg, f"must be at most {max_chars:,} characters, got {len(value):,}")
    return value


# JSON text from outside (a pasted config.json, llama-bench -o json) is checked before json.loads sees it:
# Python's JSON parser recurses once per nesting level (a RecursionError in CPython, a fatal error in Pyodide
# for "[" * 50000) and refuses integers of more than 4,300 digits with a message that names no field. Real
# files nest 3-4 levels; their numbers have fewer than 25 characters.
JSON_MAX_DEPTH = 32
JSON_MAX_NUMBER_CHARS = 40
# One pass over the text: a string (to its closing quote, or to the end when it has none, so no position is
# scanned twice), a bracket, or a number. Brackets and digits inside strings do not count.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]|-?[0-9][0-9.eE+-]*')


def check_json_text(text: str, what: str) -> None:
    """Refuse JSON text that would make json.loads recurse deeply or parse a huge number, before it sees it.

    ValueError("what: ...") naming the limit. One linear pass (a regex tokenizer), whatever the text."""
    depth = deepest = longest = 0
    for tok in _JSON_TOKENS.findall(text):
        c = tok[0]
        if c == "[" or c == "{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > JSON_MAX_DEPTH:
                    raise ValueError(f"{what}: nested more than {JSON_MAX_DEPTH} levels deep (real files nest 3 or 4)")
        elif c == "]" or c == "}":
            depth -= 1
        elif c != '"' and len(tok) > longest:
            longest = len(tok)
    if longest > JSON_MAX_NUMBER_CHARS:
        raise ValueError(
            f"{what}: a number of {longest:,} characters (at most {JSON_MAX_NUMBER_CHARS}); no field needs one"
        )
