"""Is a single value the reference's value? Numbers under the tolerance policy, base-n
numerals, then sympy.

Cheap rules run first (string identity, exact numbers with :class:`fractions.Fraction`), sympy
only when the cheap rules cannot decide.

Numeric tolerance (the labelling policy, :class:`~.outcome.Policy`):

- a reference written as a decimal with ``d`` decimals is a rounded value and accepts any
  response within ``0.5 * 10^-d`` of it (``3.14`` accepts ``3.14159`` and ``\\pi``, not ``3.15``);
- an exact reference (integer, fraction, radical, pi, e, ...) accepts an exact response only if
  equal, and a decimal response only if essentially exact (relative error below
  ``5 * 10^-exact_sig_digits``; 9 digits by default: ``0.333333333`` for ``1/3``, not ``0.33``).
"""

from __future__ import annotations

import re
from fractions import Fraction

import mpmath
import sympy

from . import symbolic
from .numbers import Num, TooLarge, eval_arith, parse_number
from .outcome import Outcome, Policy, no, yes
from .shapes import Scalar

mpmath.mp.dps = 50


# ---------------------------------------------------------------------------------------------
# Numbers


def _num_of(node: Scalar) -> Num | None:
    t = node.text
    m = re.fullmatch(r"\s*(-?\d+)\s*:\s*(\d+)\s*", t)    # ratio 7:32
    if m and int(m.group(2)) != 0:
        return Num(Fraction(int(m.group(1)), int(m.group(2))))
    n = parse_number(t)
    if n is None:
        try:
            v = eval_arith(t)
        except TooLarge:
            return None
        if v is None:
            return None
        n = Num(v)
    return Num(n.value, n.decimals, n.percent or node.percent)


def _variants(value, decimals, percent):
    """A percent can mean its number (25) or its fraction (0.25)."""
    yield value, decimals
    if percent:
        yield value / 100, None if decimals is None else decimals + 2


def numbers_match(ref_v, ref_dec, resp_v, resp_dec, policy: Policy) -> bool:
    """The tolerance policy for one reference value against one response value.

    Values may be ``Fraction`` or ``mpmath`` numbers; ``*_dec`` is the number of decimals the
    value was written with (``None`` = exact).
    """
    if isinstance(ref_v, Fraction) and isinstance(resp_v, Fraction) and ref_v == resp_v:
        return True
    a, b = _mp(ref_v), _mp(resp_v)
    diff = abs(a - b)
    if ref_dec is not None and policy.rounded_reference_tolerance:
        return diff <= mpmath.mpf(5) * mpmath.power(10, -(ref_dec + 1)) * (1 + mpmath.mpf("1e-12"))
    scale = max(abs(a), abs(b))
    if resp_dec is None:
        return diff == 0 if isinstance(ref_v, Fraction) and isinstance(resp_v, Fraction) \
            else diff <= mpmath.mpf("1e-25") * scale
    return diff <= mpmath.mpf(5) * mpmath.power(10, -policy.exact_sig_digits) * scale


def _mp(v):
    if isinstance(v, Fraction):
        return mpmath.mpf(v.numerator) / v.denominator
    if isinstance(v, complex):
        return mpmath.mpc(v.real, v.imag)
    try:
        return mpmath.mpf(str(v))
    except Exception:
        return mpmath.mpc(complex(v))


def _match_with_percent(ref_v, ref_dec, ref_pct, resp_v, resp_dec, resp_pct, policy) -> bool:
    if ref_pct and resp_pct:
        return numbers_match(ref_v, ref_dec, resp_v, resp_dec, policy)
    for rv, rd in _variants(ref_v, ref_dec, ref_pct):
        for sv, sd in _variants(resp_v, resp_dec, resp_pct):
            if numbers_match(rv, rd, sv, sd, policy):
                return True
    return False


# ---------------------------------------------------------------------------------------------
# Scalars

# 2516_8, 2516_{8}, (2516)_8, 2516_{(8)}: digits, then the base as a subscript
_BASE_RE = re.compile(r"^(\()?(?P<digits>[0-9A-Za-z]+)(?(1)\))_\{?(\()?(?P<base>\d+)(?(3)\))\}?$")


_PLAIN_NUMBER_RE = re.compile(r"^[-+]?\\?\$?\s*(\d[\d,]*(\.\d*)?|\.\d+)\s*(\\?%)?$")
_BINARY_OP_RE = re.compile(
    r"[\d)}]\s*(?:[+\-*×·÷^]|\\times|\\cdot|\\div)\s*[\d(\\{]")
_SCIENTIFIC_RE = re.compile(r"^\s*[-+]?\d+(\.\d+)?\s*(?:\*|×|\\times|\\cdot)\s*10\s*"
                            r"\^\s*\{?\s*[-+]?\d+\s*\}?\s*$")


def unevaluated_arithmetic(answer: str, reference: str) -> bool:
    """True when the reference is a plain number but the answer is arithmetic still to be
    done (``81 * 7`` for ``567``, ``48+24`` for ``72``): repeating the question's operation
    must not earn the reward. A single fraction (``1/2``, ``\\frac{1}{2}``) and scientific
    notation (``3 \\times 10^5``) are values, not unevaluated work; but a fraction whose
    value is an integer (``1134/2``, ``\\frac{6}{2}``, ``567/1``) is a division still to be
    done (the arithmetic tasks' ``What is 1134 / 2?``)."""
    if not _PLAIN_NUMBER_RE.match(reference.strip()):
        return False
    text = answer.strip().rstrip("=").strip()
    if _integer_fraction(text):
        return True
    return bool(_BINARY_OP_RE.search(text)) and not _SCIENTIFIC_RE.match(text)


_FRACTION_RE = re.compile(r"[-+]?\s*(?:(\d+)\s*/\s*(\d+)|"
                          r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\})")


def _integer_fraction(text: str) -> bool:
    """``text`` is one fraction of integers whose denominator divides its numerator."""
    m = _FRACTION_RE.fullmatch(text.strip().strip("$").strip())
    if not m:
        return False
    num, den = (m[1], m[2]) if m[1] is not None else (m[3], m[4])
    return int(den) != 0 and int(num) % int(den) == 0


def _same_spelling(a: str, b: str) -> bool:
    """Identical up to spacing and ``\\text`` wrappers. Braces are kept: ``\\sqrt{2}+1`` is
    not ``\\sqrt{2+1}`` (both lose their braces under :func:`compact`)."""
    def key(t: str) -> str:
        return re.sub(r"\s+", "", re.sub(r"\\text\{([^{}]*)\}", r"\1", t))
    return key(a) == key(b)


def compare_scalars(ref: Scalar, resp: Scalar, policy: Policy) -> Outcome:
    """Compare two single values: string, base-n numeral, exact number, then sympy."""
    if ref.unit and resp.unit and ref.unit != resp.unit:
        # the answer must be in the reference's unit: 5 m is not 5 cm, 50 mm is not 5 cm either
        return no(f"different units: {resp.unit} vs {ref.unit}")
    if _same_spelling(ref.text, resp.text) and ref.percent == resp.percent:
        return yes("string match")
    if not policy.accept_unevaluated and unevaluated_arithmetic(resp.text, ref.text):
        return no(f"unevaluated arithmetic: {resp.text} (the reference is a number)")
    base = _compare_base(ref.text, resp.text)
    if base is not None:
        return base
    rn, sn = _num_of(ref), _num_of(resp)
    if rn is not None and sn is not None:
        ok = _match_with_percent(rn.value, rn.decimals, rn.percent, sn.value, sn.decimals,
                                 sn.percent, policy)
        return Outcome(ok, f"numeric: {resp.text} {'==' if ok else '!='} {ref.text}")
    return _compare_symbolic(ref, resp, rn, sn, policy)


def _compare_base(ref: str, resp: str) -> Outcome | None:
    mr, ms = _BASE_RE.match(ref.strip()), _BASE_RE.match(resp.strip())
    if not mr and not ms:
        return None
    digits_r = mr.group("digits") if mr else ref.strip()
    digits_s = ms.group("digits") if ms else resp.strip()
    if mr and ms and mr.group("base") != ms.group("base"):
        return no("base-n: different bases")
    if not re.fullmatch(r"[0-9A-Za-z]+", digits_r + digits_s):
        return None
    ok = digits_r.lstrip("0").upper() == digits_s.lstrip("0").upper()
    return Outcome(ok, "base-n numeral digits")


def _compare_symbolic(ref: Scalar, resp: Scalar, rn: Num | None, sn: Num | None,
                      policy: Policy) -> Outcome:
    a = symbolic.to_sympy(ref.text) if rn is None else None
    b = symbolic.to_sympy(_imag_j(resp.text, ref.text)) if sn is None else None
    if (rn is None and a is None) or (sn is None and b is None):
        return no("unparseable or unsafe expression")
    va = rn.value if rn is not None else symbolic.numeric_value(a)
    vb = sn.value if sn is not None else symbolic.numeric_value(b)
    if va is not None and vb is not None:
        ok = _match_with_percent(va, rn.decimals if rn else None,
                                 ref.percent or bool(rn and rn.percent),
                                 vb, sn.decimals if sn else None,
                                 resp.percent or bool(sn and sn.percent),
                                 policy)
        if ok and _exact_pair(ref, resp, rn, sn) and symbolic.distinct_values(
                _exact_sympy(a, rn), _exact_sympy(b, sn)):
            return no("exact values differ beyond the numeric comparison")
        return Outcome(ok, f"numeric value: {'equal' if ok else 'differs'}")
    if a is None or b is None:
        # an expression identically equal to the number (sin^2 x + cos^2 x - 1 for 0)
        if _exact_pair(ref, resp, rn, sn) and symbolic.exact_equal(
                _exact_sympy(a, rn), _exact_sympy(b, sn)) is True:
            return yes("symbolic: identically equal to the number")
        return no("number vs expression with variables")
    res = symbolic.exact_equal(a, b)
    if res is None:
        return no("symbolic: undecided")
    return Outcome(res, f"symbolic: {'equal' if res else 'differs'}")


def _exact_pair(ref: Scalar, resp: Scalar, rn: Num | None, sn: Num | None) -> bool:
    """Both values written exactly (no decimals, no percent): they must be equal, not close."""
    return not (ref.percent or resp.percent) and all(
        n is None or (n.decimals is None and not n.percent) for n in (rn, sn))


def _exact_sympy(expr, num: Num | None):
    """The sympy value of one side: its expression, or its exact number."""
    if num is None:
        return expr
    return sympy.Rational(num.value.numerator, num.value.denominator)


def _imag_j(resp: str, ref: str) -> str:
    # 3+4j for 3+4i: engineers' imaginary unit, only when the reference uses i.
    if re.search(r"(?<![a-zA-Z\\])i(?![a-zA-Z])", ref) and re.search(
            r"\dj(?![a-zA-Z])|(?<![a-zA-Z\\])j$", resp):
        return re.sub(r"(?<![a-zA-Z\\])j(?![a-zA-Z])", "i", resp)
    return resp
