"""Tests for libra_jax.model.linear.parse_linear_constraints."""

import numpy as np
import pytest

from libra_jax.model.linear import parse_linear_constraints
from libra_jax.types import LibraInputError


def _one(s, d=4):
    return parse_linear_constraints([s], d)


@pytest.mark.parametrize(
    "s, kind, a, b",
    [
        ("bw[0] == 500", "eq", [1, 0, 0, 0], 500),
        ("bw[0] >= bw[1]", "in", [-1, 1, 0, 0], 0),
        ("bw[2] + bw[3] == 200", "eq", [0, 0, 1, 1], 200),
        ("2*bw[0] - 0.5 bw[1] <= 100 + bw[3]", "in", [2, -0.5, 0, -1], 100),
        ("1e3 >= bw[1]", "in", [0, 1, 0, 0], 1000),
        ("bw[1] =< 7", "in", [0, 1, 0, 0], 7),
        ("bw[1] => 7", "in", [0, -1, 0, 0], -7),
        ("-bw[0] + 3 <= -2.5e1", "in", [-1, 0, 0, 0], -28),
        ("bw[0]*2 + 3 * 2 bw[1] == .5", "eq", [2, 6, 0, 0], 0.5),
        ("  bw [ 3 ]  ==  bw[0]+bw[0]  ", "eq", [-2, 0, 0, 1], 0),
        ("bw[0] + 10 <= bw[1] + 4", "in", [1, -1, 0, 0], -6),
        ("bw[0] - bw[1] - bw[2] >= 0", "in", [-1, 1, 1, 0], 0),
    ],
)
def test_examples(s, kind, a, b):
    a_eq, b_eq, a_in, b_in = _one(s)
    if kind == "eq":
        assert a_in.shape == (0, 4) and b_in.shape == (0,)
        np.testing.assert_allclose(a_eq, [a])
        np.testing.assert_allclose(b_eq, [b])
    else:
        assert a_eq.shape == (0, 4) and b_eq.shape == (0,)
        np.testing.assert_allclose(a_in, [a])
        np.testing.assert_allclose(b_in, [b])


def test_multiple_constraints_set():
    """The reference's 4D multiple_constraints set (with the sum as a string too)."""
    a_eq, b_eq, a_in, b_in = parse_linear_constraints(
        [
            "bw[0] + bw[1] + bw[2] + bw[3] == 1000",
            "bw[0] == 500",
            "bw[0] >= bw[1]",
            "bw[1] >= bw[2]",
            "bw[2] + bw[3] == 200",
        ],
        4,
    )
    assert a_eq.dtype == np.float64 and a_in.dtype == np.float64
    np.testing.assert_array_equal(a_eq, [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 1, 1]])
    np.testing.assert_array_equal(b_eq, [1000, 500, 200])
    np.testing.assert_array_equal(a_in, [[-1, 1, 0, 0], [0, -1, 1, 0]])
    np.testing.assert_array_equal(b_in, [0, 0])
    bw = np.array([500.0, 300.0, 100.0, 100.0])  # the reference's feasible equal split
    np.testing.assert_allclose(a_eq @ bw, b_eq)
    assert np.all(a_in @ bw <= b_in)
    assert not np.any(np.signbit(a_in[a_in == 0]))  # no -0.0


def test_empty_and_none():
    for strings in ([], (), None):
        a_eq, b_eq, a_in, b_in = parse_linear_constraints(strings, 3)
        assert a_eq.shape == (0, 3) and b_eq.shape == (0,)
        assert a_in.shape == (0, 3) and b_in.shape == (0,)


@pytest.mark.parametrize(
    "s, needles",
    [
        ("bw[7] <= 3", ["dimension index 7 out of range (network has 4 dims)"]),
        ("bw[0] < 3", ["strict", "'<'"]),
        ("bw[0] > 3", ["strict", "'>'"]),
        ("bw[0] + bw[1]", ["missing comparison operator"]),
        ("bw[0] 3 <= 4", ["unexpected '3'"]),
        ("5 <= 6", ["no bw term"]),
        ("bw[1] - bw[1] == 2", ["cancel"]),
        ("x[0] <= 3", ["unknown token 'x'"]),
        ("bw[0] <= 3 $", ["unknown token '$'"]),
        ("__import__('os') <= 1", ["unknown token '__import__'"]),
        ("bw[0] = 3", ["'=='"]),
        ("bw[0] * bw[1] <= 3", ["not linear"]),
        ("bw[-1] <= 3", ["non-negative integer"]),
        ("bw[0.5] <= 3", ["non-negative integer", "'0.5'"]),
        ("bw[0 <= 3", ["expected ']'"]),
        ("bw[0] <= ", ["expression ends"]),
        ("bw[0] <= bw[1] <= 5", ["second comparison operator"]),
        ("", ["empty constraint"]),
        ("bw[0] <= inf", ["unknown token 'inf'"]),
        ("bw[0] <= 1e400", ["not finite"]),
    ],
)
def test_errors(s, needles):
    with pytest.raises(LibraInputError) as e:
        parse_linear_constraints(["bw[0] >= 1", "bw[1] >= 1", s], 4)
    msg = str(e.value)
    assert msg.startswith(f'constraints.linear[2] = "{s}": ')
    for n in needles:
        assert n in msg


def test_exact_message_example():
    with pytest.raises(LibraInputError) as e:
        parse_linear_constraints(["bw[0] == 1", "bw[1] == 1", "bw[7] <= 3"], 4)
    assert str(e.value) == (
        'constraints.linear[2] = "bw[7] <= 3": dimension index 7 out of range '
        "(network has 4 dims)"
    )


def test_bad_containers_and_field_name():
    with pytest.raises(LibraInputError, match="single string"):
        parse_linear_constraints("bw[0] <= 3", 4)
    with pytest.raises(LibraInputError, match=r"my\.field\[0\] = 3"):
        parse_linear_constraints([3], 4, field="my.field")
    with pytest.raises(LibraInputError, match=r"^my\.field\[0\]"):
        parse_linear_constraints(["bw[4] <= 1"], 4, field="my.field")
    with pytest.raises(LibraInputError, match="num_dims"):
        parse_linear_constraints(["bw[0] <= 1"], 0)
