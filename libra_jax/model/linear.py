"""Parser for linear bandwidth constraints written as strings.

Grammar (whitespace is free)::

    constraint := expr OP expr             OP is one of  ==  <=  >=  =<  =>
    expr       := [+|-] term { (+|-) term }
    term       := factor { [*] factor }    at most one bw factor per term; an implicit
                                           product is allowed only before ``bw``
    factor     := NUMBER | bw [ INDEX ]

e.g. ``"bw[0] == 500"``, ``"bw[0] >= bw[1]"``, ``"2*bw[0] - 0.5 bw[1] <= 100 + bw[3]"``.
Each constraint becomes one row ``a @ bw (== | <=) b``; ``>=`` rows are negated so every
inequality reads ``a_in @ bw <= b_in``. A hand-written tokenizer and recursive-descent
parser; nothing is ever evaluated as Python. Strict ``<`` / ``>`` are rejected (the
feasible set must be closed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_int, as_list
from libra_jax.types import LibraInputError, clip, show

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<bw>bw\b)
  | (?P<op>==|<=|>=|=<|=>)
  | (?P<strict><|>)
  | (?P<single_eq>=)
  | (?P<punct>[+\-*\[\]])
    """,
    re.VERBOSE | re.ASCII,  # digits are 0-9 only (float() would read other scripts)
)
_OPS = {"==": "==", "<=": "<=", "=<": "<=", ">=": ">=", "=>": ">="}


class _ParseError(Exception):
    """Internal: message without the field prefix."""


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    """-> list of (kind, text, position)."""
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            word = re.match(r"[A-Za-z_]\w*|.", text[pos:], re.DOTALL).group(0)
            raise _ParseError(
                f"unknown token {show(word)} at character {pos}; allowed are numbers, "
                "bw[i], "
                "+, -, *, ==, <=, >="
            )
        kind = m.lastgroup
        if kind == "strict":
            raise _ParseError(
                f"strict comparison {show(m.group(0))} at character {pos} is not "
                "supported; use "
                f"{m.group(0)}= (constraints must be non-strict)"
            )
        if kind == "single_eq":
            raise _ParseError(f"single '=' at character {pos}; use '==' for equality")
        if kind != "ws":
            tokens.append((kind, m.group(0), pos))
        pos = m.end()
    return tokens


def _check_magnitude(x: float, what: str) -> None:
    """A number of a constraint: 0, or between 1/max_coefficient and max_coefficient in
    magnitude (`limits.LIMITS`), so that the row scaled to unit norm stays finite."""
    big = LIMITS.max_coefficient
    if x != 0 and not 1.0 / big <= abs(x) <= big:
        raise _ParseError(
            f"{what} = {x:.3g} is outside the supported magnitudes (0, or {1.0 / big:g} to "
            f"{big:g} in absolute value)")


class _Parser:
    def __init__(self, tokens, num_dims: int):
        self.toks = tokens
        self.i = 0
        self.num_dims = num_dims

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "", -1)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, text: str):
        kind, val, pos = self.take()
        if val != text:
            where = "the end" if kind == "end" else f"{show(val)} at character {pos}"
            raise _ParseError(f"expected {show(text)}, got {where}")

    def factor(self):
        """-> (coef vector or None, number)."""
        kind, val, pos = self.take()
        if kind == "num":
            x = float(val)
            if not math.isfinite(x):
                raise _ParseError(f"number {show(val, 40)} is not finite")
            _check_magnitude(x, f"number {show(val, 40)}")
            return None, x
        if kind == "bw":
            self.expect("[")
            k, idx, ipos = self.take()
            if k != "num" or not re.fullmatch(r"[0-9]+", idx):
                shown = "the end" if k == "end" else repr(idx)
                raise _ParseError(
                    f"bw index must be a non-negative integer, got {shown}"
                    + ("" if k == "end" else f" at character {ipos}")
                )
            self.expect("]")
            d = int(idx) if len(idx) <= 6 else self.num_dims
            if d >= self.num_dims:
                raise _ParseError(
                    f"dimension index {clip(idx, 40)} out of range (network has {self.num_dims} "
                    "dims)"
                )
            v = np.zeros(self.num_dims)
            v[d] = 1.0
            return v, 1.0
        if kind == "end":
            raise _ParseError("expression ends where a number or bw[i] was expected")
        raise _ParseError(f"expected a number or bw[i] at character {pos}, got {show(val)}")

    def term(self):
        """-> (coef vector [D], constant)."""
        vec, scale = self.factor()
        while True:
            kind, val, _ = self.peek()
            if val == "*":
                self.take()
            elif kind == "bw" and vec is None:
                pass  # implicit product: "0.5 bw[1]"
            else:
                break
            v2, s2 = self.factor()
            if v2 is not None:
                if vec is not None:
                    raise _ParseError("product of two bw terms is not linear")
                vec = v2
            scale *= s2
            _check_magnitude(scale, "a product")
        if vec is None:
            return np.zeros(self.num_dims), scale
        return vec * scale, 0.0

    def expr(self):
        coef, const = np.zeros(self.num_dims), 0.0
        sign = 1.0
        if self.peek()[0] == "punct" and self.peek()[1] in ("+", "-"):
            sign = -1.0 if self.take()[1] == "-" else 1.0
        while True:
            v, c = self.term()
            coef, const = coef + sign * v, const + sign * c
            kind, val, _ = self.peek()
            if kind == "punct" and val in ("+", "-"):
                self.take()
                sign = -1.0 if val == "-" else 1.0
            else:
                return coef, const

    def constraint(self):
        if not self.toks:
            raise _ParseError("empty constraint")
        lhs = self.expr()
        kind, val, pos = self.take()
        if kind != "op":
            if kind == "end":
                raise _ParseError("missing comparison operator (==, <= or >=)")
            raise _ParseError(
                f"unexpected {show(val)} at character {pos}; expected +, -, or a "
                "comparison "
                "operator (==, <=, >=)"
            )
        op = _OPS[val]
        rhs = self.expr()
        kind, val, pos = self.peek()
        if kind == "op":
            raise _ParseError(
                f"second comparison operator {show(val)} at character {pos}; write chained "
                "comparisons as separate constraints"
            )
        if kind != "end":
            raise _ParseError(f"unexpected {show(val)} at character {pos}")
        # lhs.c @ bw + lhs.k  OP  rhs.c @ bw + rhs.k   ->   (lc - rc) @ bw  OP  rk - lk
        a = lhs[0] - rhs[0]
        b = rhs[1] - lhs[1]
        if not any(k == "bw" for k, _, _ in self.toks):
            raise _ParseError("constraint has no bw term")
        if not np.any(a):
            raise _ParseError("the bw terms cancel out, leaving no bw term")
        if np.abs(a).max() < 1.0 / LIMITS.max_coefficient:
            raise _ParseError(
                f"the bw terms nearly cancel out (largest coefficient {np.abs(a).max():.3g}, "
                f"below {1.0 / LIMITS.max_coefficient:g})")
        if op == ">=":
            a, b = -a, -b
        return op, a + 0.0, b + 0.0  # + 0.0 turns -0.0 into 0.0


def parse_linear_constraints(
    strings: Iterable[str] | None, num_dims: int, field: str = "constraints.linear"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parses linear constraints on the bandwidth vector.

    Args:
      strings: constraint strings (see the module docstring for the grammar); ``None``
        means no constraints.
      num_dims: D, the number of network dimensions (valid indices are 0..D-1).
      field: config field name used in error messages, e.g. ``constraints.linear``.

    Returns:
      ``(a_eq, b_eq, a_in, b_in)``: a_eq [E, D] float64, b_eq [E], a_in [I, D],
      b_in [I], meaning ``a_eq @ bw == b_eq`` and ``a_in @ bw <= b_in`` (bw in GB/s).
      E or I may be 0.

    Raises:
      LibraInputError: ``field[i] = "..." : reason`` for an unknown token, missing or
        strict operator, bw index out of range, a constraint with no bw term, or a
        non-linear term; also when ``strings`` is a bare string or holds a non-string.
    """
    num_dims = as_int(num_dims, f"{field}: num_dims", 1, LIMITS.max_dims)
    if strings is None:
        strings = []
    if isinstance(strings, (str, bytes)):
        raise LibraInputError(
            f"{field} = {show(strings)}: expected a list of constraint strings, got a "
            "single "
            "string (wrap it in a list)."
        )
    items = as_list(strings, field, what="a list of constraint strings")
    if len(items) > LIMITS.max_constraints:
        raise LibraInputError(
            f"{field}: {len(items):,} constraints; at most {LIMITS.max_constraints:,} are "
            "supported.")
    eq_a, eq_b, in_a, in_b = [], [], [], []
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise LibraInputError(f"{field}[{i}] = {show(s)}: expected a string.")
        if len(s) > LIMITS.max_constraint_chars:
            raise LibraInputError(
                f"{field}[{i}] = {show(s)}: {len(s):,} characters; at most "
                f"{LIMITS.max_constraint_chars:,} are supported.")
        try:
            op, a, b = _Parser(_tokenize(s), num_dims).constraint()
        except _ParseError as e:
            raise LibraInputError(f'{field}[{i}] = "{clip(s)}": {e}') from None
        if op == "==":
            eq_a.append(a)
            eq_b.append(b)
        else:
            in_a.append(a)
            in_b.append(b)

    def rows(a, b):
        a_arr = np.array(a, dtype=np.float64).reshape(len(a), num_dims)
        return a_arr, np.array(b, dtype=np.float64).reshape(len(b))

    return (*rows(eq_a, eq_b), *rows(in_a, in_b))
