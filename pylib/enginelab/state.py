"""Figure state: declarative field specs, validation that explains itself, and a URL codec.

A figure declares its inputs once, as a `Spec` of fields:

    SPEC = Spec("calculator", [
        Choice("model", "Model", options=lambda s: [("llama-3.1-8b", "Llama 3.1 8B"), ...], default="llama-3.1-8b"),
        Int("ctx", "Context (n_ctx)", default=8192, min=256, max=131072),
        Int("ngl", "GPU layers (-ngl)", default="auto", min=0, max=lambda s: n_layers(s) + 1, auto="auto"),
        Bool("dark", "Dark", default=False),
    ])

and gets, for free:
- `SPEC.default()`: the default state, a frozen dataclass (`state.ctx`, `state.replace(ctx=4096)`).
- `SPEC.from_query("?ctx=abc&x=1")` and `SPEC.from_form({...})`: a valid state plus a list of plain-text
  messages explaining every value that was rejected, clamped or ignored. Bad user input never raises.
- `SPEC.to_query(state)`: a query string holding only the keys that differ from the defaults.

Bounds and option lists may be callables of the fields validated before them (fields are validated in
order), so an `ngl` bound can depend on the chosen model.

A bound that depends on another field never rewrites the reader's number. `?ctx=4096&tokens=8000` gives a state
whose `tokens` is 4096 (what every computation uses) with a message saying so, while the 8000 is *held*: the URL
(`to_query`) and the form control keep showing 8000, and when the context grows again the 8000 applies. Fixed
bounds (`min=256`) clamp as before. `Spec.shown(state, key)` is the value a control or URL shows; the held
values travel in the state's `_held` field, which takes no part in equality or hashing (two states that compute
the same numbers are equal). A scrubber (widget="range") is never held: its frame follows its trace.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote

Options = Sequence[tuple[str, str]]
Dyn = Any  # a value, or a callable(partial: dict) -> value


def _resolve(v: Dyn, partial: dict):
    return v(partial) if callable(v) else v


def _clamp(v, lo, hi, auto=None, special=()):
    if (auto is not None and v == auto) or v in special:
        return v
    if lo is not None and v < lo:
        return lo
    if hi is not None and v > hi:
        return hi
    return v


def _shown(raw: str, limit: int = 40) -> str:
    """User text quoted for a message (plain text: escaping happens when it is rendered)."""
    raw = str(raw)
    return repr(raw if len(raw) <= limit else raw[:limit] + "…")


@dataclasses.dataclass(frozen=True)
class Field:
    key: str
    label: str
    default: Any
    help: str = ""
    visible: Dyn = True  # or callable(partial) -> bool: hidden fields keep their value and validation
    widget: str = ""  # a rendering hint for controls ("select", "number", "range"); "" = by kind
    url_safe: str = ""  # characters to_query leaves unescaped in this field's value (e.g. "," for a list)

    kind = "field"
    value_type = Any  # the Python type of the field's value in a State (its dataclass annotation)

    def parse(self, raw: str, partial: dict) -> tuple[Any, str | None]:
        raise NotImplementedError

    def check(self, value: Any, partial: dict) -> tuple[Any, str | None]:
        """Re-validate an already-typed value (a default, or a value carried over)."""
        return self.parse(self.encode(value), partial)

    def encode(self, value: Any) -> str:
        return str(value)

    def validate(self, raw: Any, partial: dict, typed: bool) -> tuple[Any, str | None, Any]:
        """(value, message, held): the value every computation uses, a message when it is not what was asked,
        and the reader's own value when a bound that depends on other fields clamped it (else None)."""
        v, msg = self.check(raw, partial) if typed else self.parse(str(raw), partial)
        return v, msg, None

    def default_for(self, partial: dict) -> Any:
        return _resolve(self.default, partial)

    def fallback(self, partial: dict) -> Any:
        """What a rejected value is replaced by: the default, made valid for the other choices."""
        return self.default_for(partial)

    def describe_allowed(self, partial: dict) -> str:
        return ""

    def visible_for(self, partial: dict) -> bool:
        return bool(_resolve(self.visible, partial))


@dataclasses.dataclass(frozen=True)
class Choice(Field):
    options: Dyn = ()  # [(value, label), ...] or callable(partial) -> that
    kind = "choice"
    value_type = str

    def options_for(self, partial: dict) -> list[tuple[str, str]]:
        return [(str(v), str(lab)) for v, lab in _resolve(self.options, partial)]

    def fallback(self, partial):
        d, values = self.default_for(partial), [v for v, _ in self.options_for(partial)]
        return d if d in values or not values else values[0]

    def parse(self, raw, partial):
        opts = self.options_for(partial)
        values = [v for v, _ in opts]
        if raw in values:
            return raw, None
        # forgive case differences ("q4_k_m" for "Q4_K_M")
        folded = {v.lower(): v for v in values}
        if str(raw).lower() in folded:
            return folded[str(raw).lower()], None
        d = self.fallback(partial)
        return d, f"{self.label}: {_shown(raw)} is not one of {self.describe_allowed(partial)}; using {d!r}."

    def describe_allowed(self, partial):
        values = [v for v, _ in self.options_for(partial)]
        if len(values) > 12:
            return ", ".join(values[:12]) + f", … ({len(values)} in all)"
        return ", ".join(values)


@dataclasses.dataclass(frozen=True)
class Int(Field):
    min: Dyn = None
    max: Dyn = None
    step: int = 1
    auto: str | None = None  # a word accepted besides numbers (e.g. "auto" for -ngl)
    special: tuple = ()  # ((value, meaning), ...): numbers accepted outside min..max (e.g. -c 0)
    kind = "int"

    @property
    def value_type(self):
        return int if self.auto is None else int | str  # "auto" or a number

    def bounds(self, partial) -> tuple[int | None, int | None]:
        return _resolve(self.min, partial), _resolve(self.max, partial)

    @property
    def holds(self) -> bool:
        """Whether a value beyond a bound that depends on other fields is held (see the module docstring)."""
        return self.widget != "range"

    def fallback(self, partial):
        return _clamp(self.default_for(partial), *self.bounds(partial), auto=self.auto, special=self._special_values)

    @property
    def _special_values(self) -> tuple:
        return tuple(v for v, _ in self.special)

    @staticmethod
    def _number(raw) -> int | None:
        try:
            v = float(str(raw).strip().replace("_", "").replace(",", ""))
            if not math.isfinite(v) or v != int(v):
                return None
            return int(v)
        except (ValueError, OverflowError):
            return None

    def parse(self, raw, partial):
        raw_s = str(raw).strip()
        if self.auto is not None and raw_s.lower() == self.auto:
            return self.auto, None
        lo, hi = self.bounds(partial)
        v = self._number(raw_s)
        if v is None:
            d = self.fallback(partial)
            return (
                d,
                f"{self.label}: {_shown(raw)} is not a whole number; allowed: "
                f"{self.describe_allowed(partial)}; using {d}.",
            )
        if v in self._special_values:
            return v, None
        if lo is not None and v < lo:
            return lo, f"{self.label}: {v} is below the minimum {lo}; using {lo}."
        if hi is not None and v > hi:
            return hi, f"{self.label}: {v} is above the maximum {hi}; using {hi}."
        return v, None

    def validate(self, raw, partial, typed):
        v, msg = self.check(raw, partial) if typed else self.parse(str(raw), partial)
        asked = self._number(raw)
        if not self.holds or asked is None or asked == v or asked in self._special_values:
            return v, msg, None
        lo, hi = self.bounds(partial)
        if callable(self.max) and hi is not None and asked > hi:
            limit, word = hi, "above"
        elif callable(self.min) and lo is not None and asked < lo:
            limit, word = lo, "below"
        else:
            return v, msg, None  # a fixed bound: clamped, with its message
        return (
            v,
            f"{self.label}: {asked} is {word} {limit}, the {'most' if word == 'above' else 'least'} the other "
            f"settings allow; using {v} (your {asked} stays in the link and applies again when they allow it).",
            asked,
        )

    def describe_allowed(self, partial):
        lo, hi = self.bounds(partial)
        rng = (
            f"{lo} to {hi}"
            if lo is not None and hi is not None
            else f"at least {lo}"
            if lo is not None
            else f"at most {hi}"
            if hi is not None
            else "any whole number"
        )
        special = "".join(f"{v} ({meaning}) or " for v, meaning in self.special)
        return f"{self.auto!r} or {special}{rng}" if self.auto is not None else special + rng


@dataclasses.dataclass(frozen=True)
class Float(Field):
    min: Dyn = None
    max: Dyn = None
    step: float = 0.1
    kind = "float"
    value_type = float

    def bounds(self, partial):
        return _resolve(self.min, partial), _resolve(self.max, partial)

    def fallback(self, partial):
        return _clamp(self.default_for(partial), *self.bounds(partial))

    def parse(self, raw, partial):
        lo, hi = self.bounds(partial)
        try:
            v = float(str(raw).strip())
            if not math.isfinite(v):
                raise ValueError
        except (ValueError, OverflowError):
            d = self.fallback(partial)
            return (
                d,
                f"{self.label}: {_shown(raw)} is not a number; allowed: {self.describe_allowed(partial)}; using {d}.",
            )
        if lo is not None and v < lo:
            return lo, f"{self.label}: {v:g} is below the minimum {lo:g}; using {lo:g}."
        if hi is not None and v > hi:
            return hi, f"{self.label}: {v:g} is above the maximum {hi:g}; using {hi:g}."
        return v, None

    def encode(self, value):
        return repr(float(value)).removesuffix(".0")

    def validate(self, raw, partial, typed):
        v, msg = self.check(raw, partial) if typed else self.parse(str(raw), partial)
        try:
            asked = float(str(raw).strip())
        except (ValueError, OverflowError):
            return v, msg, None
        if not math.isfinite(asked) or asked == v:
            return v, msg, None
        lo, hi = self.bounds(partial)
        if callable(self.max) and hi is not None and asked > hi:
            limit, word = hi, "above"
        elif callable(self.min) and lo is not None and asked < lo:
            limit, word = lo, "below"
        else:
            return v, msg, None
        return (
            v,
            f"{self.label}: {asked:g} is {word} {limit:g}, the {'most' if word == 'above' else 'least'} the other "
            f"settings allow; using {v:g} (your {asked:g} stays in the link and applies again when they allow it).",
            asked,
        )

    def describe_allowed(self, partial):
        lo, hi = self.bounds(partial)
        return f"{lo:g} to {hi:g}" if lo is not None and hi is not None else "a number"


@dataclasses.dataclass(frozen=True)
class Bool(Field):
    kind = "bool"
    value_type = bool
    TRUE = ("1", "true", "yes", "on")
    FALSE = ("0", "false", "no", "off", "")

    def parse(self, raw, partial):
        s = str(raw).strip().lower()
        if s in self.TRUE:
            return True, None
        if s in self.FALSE:
            return False, None
        d = self.fallback(partial)
        return d, f"{self.label}: {_shown(raw)} is not on/off (use 1 or 0); using {'1' if d else '0'}."

    def encode(self, value):
        return "1" if value else "0"

    def describe_allowed(self, partial):
        return "1 or 0"


@dataclasses.dataclass(frozen=True)
class Text(Field):
    """Free text (a <textarea>): kept as typed, with \r\n folded to \n and at most `max_len` characters.

    Whatever it holds is the figure's to interpret; a figure reports its own parse errors."""

    max_len: int = 20000
    rows: int = 6
    placeholder: str = ""
    suggestions: tuple = ()  # a one-line field's examples (offered in a <datalist>)
    kind = "text"
    value_type = str

    def parse(self, raw, partial):
        s = str(raw).replace("\r\n", "\n").replace("\r", "\n")
        if len(s) > self.max_len:
            return s[
                : self.max_len
            ], f"{self.label}: {len(s):,} characters is over the limit; the first {self.max_len:,} are used."
        return s, None

    def describe_allowed(self, partial):
        return f"text of at most {self.max_len:,} characters"


class Spec:
    """The inputs of one figure, in validation order."""

    def __init__(self, name: str, fields: Iterable[Field]):
        self.name = name
        self.fields = tuple(fields)
        keys = [f.key for f in self.fields]
        if len(set(keys)) != len(keys):
            raise ValueError(f"duplicate field keys in spec {name!r}")
        self.by_key = {f.key: f for f in self.fields}
        cls = dataclasses.make_dataclass(
            f"{name.title().replace('-', '')}State",
            [(f.key, f.value_type) for f in self.fields]
            # ((key, the reader's value), ...) for values a bound from another field clamped: see shown()
            + [("_held", tuple, dataclasses.field(default=(), compare=False, repr=False))],
            frozen=True,
        )
        cls.replace = lambda self, **kw: dataclasses.replace(self, **kw)
        cls.as_dict = lambda self: {k: getattr(self, k) for k in keys}
        self.State = cls

    # -- building states ------------------------------------------------------------------------------------
    def _validate(self, raw: Mapping[str, Any], typed: bool) -> tuple[Any, list[str]]:
        partial: dict = {}
        messages: list[str] = []
        held: list = []
        for f in self.fields:
            if f.key in raw and raw[f.key] is not None:
                v, msg, keep = f.validate(raw[f.key], partial, typed)
                if keep is not None:
                    held.append((f.key, keep))
            else:
                v, msg = f.check(f.default_for(partial), partial)
                if msg:  # a default out of range for the other choices (e.g. ngl for a smaller model)
                    msg = None
            if msg:
                messages.append(msg)
            partial[f.key] = v
        return self.State(**partial, _held=tuple(held)), messages

    def default(self):
        state, _ = self._validate({}, typed=True)
        return state

    def from_query(self, query: str | Mapping[str, str]) -> tuple[Any, list[str]]:
        """State from a URL query ('?a=1&b=2' or a mapping). Unknown keys are reported and ignored."""
        if isinstance(query, str):
            pairs = parse_qsl(query.lstrip("?"), keep_blank_values=True)
        else:
            pairs = list(query.items())
        raw: dict[str, str] = {}
        messages: list[str] = []
        for k, v in pairs:
            if k not in self.by_key:
                messages.append(f"Unknown setting {_shown(k)} ignored; this figure takes {', '.join(self.by_key)}.")
                continue
            raw[k] = v  # the last one wins, as in most servers
        state, msgs = self._validate(raw, typed=False)
        return state, messages + msgs

    def from_form(self, values: Mapping[str, str]) -> tuple[Any, list[str]]:
        """State from form values (strings, as the DOM gives them). Missing keys take their defaults."""
        return self._validate({k: v for k, v in values.items() if k in self.by_key}, typed=False)

    def coerce(self, state_or_values) -> tuple[Any, list[str]]:
        """Re-validate a typed state (or dict) after a change, e.g. `spec.coerce(state.replace(model=...))`.
        A state's held values (see shown) are re-validated as the reader gave them."""
        if hasattr(state_or_values, "as_dict"):
            d = {**state_or_values.as_dict(), **dict(getattr(state_or_values, "_held", ()))}
        else:
            d = dict(state_or_values)
        return self._validate(d, typed=True)

    def shown(self, state, key: str):
        """The value a control and the URL show for `key`: the reader's own when a bound that depends on another
        field clamped it (the state's field holds the clamped value that computations use), else the state's."""
        return dict(getattr(state, "_held", ())).get(key, getattr(state, key))

    # -- encoding -------------------------------------------------------------------------------------------
    def to_params(self, state) -> dict[str, str]:
        """Only the keys whose values differ from the defaults (given the earlier fields), in spec order. A held
        value is written as the reader gave it."""
        out: dict[str, str] = {}
        partial: dict = {}
        for f in self.fields:
            v = getattr(state, f.key)
            d, _ = f.check(f.default_for(partial), partial)
            shown = self.shown(state, f.key)
            if f.encode(shown) != f.encode(d):
                out[f.key] = f.encode(shown)
            partial[f.key] = v
        return out

    def to_query(self, state) -> str:
        """'?a=1&b=2' with only non-default keys, or '' for the default state."""
        last = getattr(self, "_last_query", None)
        if last is not None and last[0] is state:  # one change asks for its state's query more than once
            return last[1]
        params = self.to_params(state)
        q = "?" + "&".join(f"{quote(k)}={quote(v, safe=self.by_key[k].url_safe)}" for k, v in params.items())
        q = q if params else ""
        self._last_query = (state, q)
        return q

    # -- for controls ---------------------------------------------------------------------------------------
    def partial_before(self, state, key: str) -> dict:
        partial = {}
        for f in self.fields:
            if f.key == key:
                break
            partial[f.key] = getattr(state, f.key)
        return partial
