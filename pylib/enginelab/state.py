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


def _clamp(v, lo, hi, auto=None):
    if auto is not None and v == auto:
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

    kind = "field"
    value_type = Any  # the Python type of the field's value in a State (its dataclass annotation)

    def parse(self, raw: str, partial: dict) -> tuple[Any, str | None]:
        raise NotImplementedError

    def check(self, value: Any, partial: dict) -> tuple[Any, str | None]:
        """Re-validate an already-typed value (a default, or a value carried over)."""
        return self.parse(self.encode(value), partial)

    def encode(self, value: Any) -> str:
        return str(value)

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
    kind = "int"

    @property
    def value_type(self):
        return int if self.auto is None else int | str  # "auto" or a number

    def bounds(self, partial) -> tuple[int | None, int | None]:
        return _resolve(self.min, partial), _resolve(self.max, partial)

    def fallback(self, partial):
        return _clamp(self.default_for(partial), *self.bounds(partial), auto=self.auto)

    def parse(self, raw, partial):
        raw_s = str(raw).strip()
        if self.auto is not None and raw_s.lower() == self.auto:
            return self.auto, None
        lo, hi = self.bounds(partial)
        try:
            v = float(raw_s.replace("_", "").replace(",", ""))
            if not math.isfinite(v) or v != int(v):
                raise ValueError
            v = int(v)
        except (ValueError, OverflowError):
            d = self.fallback(partial)
            return (
                d,
                f"{self.label}: {_shown(raw)} is not a whole number; allowed: "
                f"{self.describe_allowed(partial)}; using {d}.",
            )
        if lo is not None and v < lo:
            return lo, f"{self.label}: {v} is below the minimum {lo}; using {lo}."
        if hi is not None and v > hi:
            return hi, f"{self.label}: {v} is above the maximum {hi}; using {hi}."
        return v, None

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
        return f"{self.auto!r} or {rng}" if self.auto is not None else rng


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
            f"{name.title().replace('-', '')}State", [(f.key, f.value_type) for f in self.fields], frozen=True
        )
        cls.replace = lambda self, **kw: dataclasses.replace(self, **kw)
        cls.as_dict = lambda self: {k: getattr(self, k) for k in keys}
        self.State = cls

    # -- building states ------------------------------------------------------------------------------------
    def _validate(self, raw: Mapping[str, Any], typed: bool) -> tuple[Any, list[str]]:
        partial: dict = {}
        messages: list[str] = []
        for f in self.fields:
            if f.key in raw and raw[f.key] is not None:
                value = raw[f.key]
                v, msg = f.check(value, partial) if typed else f.parse(str(value), partial)
            else:
                v, msg = f.check(f.default_for(partial), partial)
                if msg:  # a default out of range for the other choices (e.g. ngl for a smaller model)
                    msg = None
            if msg:
                messages.append(msg)
            partial[f.key] = v
        return self.State(**partial), messages

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
        """Re-validate a typed state (or dict) after a change, e.g. `spec.coerce(state.replace(model=...))`."""
        d = state_or_values.as_dict() if hasattr(state_or_values, "as_dict") else dict(state_or_values)
        return self._validate(d, typed=True)

    # -- encoding -------------------------------------------------------------------------------------------
    def to_params(self, state) -> dict[str, str]:
        """Only the keys whose values differ from the defaults (given the earlier fields), in spec order."""
        out: dict[str, str] = {}
        partial: dict = {}
        for f in self.fields:
            v = getattr(state, f.key)
            d, _ = f.check(f.default_for(partial), partial)
            if f.encode(v) != f.encode(d):
                out[f.key] = f.encode(v)
            partial[f.key] = v
        return out

    def to_query(self, state) -> str:
        """'?a=1&b=2' with only non-default keys, or '' for the default state."""
        params = self.to_params(state)
        if not params:
            return ""
        return "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in params.items())

    # -- for controls ---------------------------------------------------------------------------------------
    def partial_before(self, state, key: str) -> dict:
        partial = {}
        for f in self.fields:
            if f.key == key:
                break
            partial[f.key] = getattr(state, f.key)
        return partial
