"""Exact arithmetic on expression text: one tokenizer, one parser, four grammars.

Every place in rlvr that recomputes written arithmetic does it here, never with ``eval``
(one exception, :mod:`rlvr.tools.calculator`: the calculator tool reads the Python expression
syntax a model writes, ``%`` included, with :mod:`ast` and names each refused construct to the
model; moving it onto a grammar here needs ``%`` in the shared skeleton):

- :data:`INTEGER`: :func:`rlvr.tasks.arithmetic.evaluate` (checks generated worked solutions);
- :data:`COUNTDOWN`: the logic verifier's countdown answers (:mod:`rlvr.rewards.logic`);
- :data:`DECIMAL`: GSM8K calculator annotations (:mod:`rlvr.data.variants`) and the process
  reward's written equations (:mod:`rlvr.rewards.process`);
- :data:`LATEX`: numeric LaTeX in math answers (:func:`rlvr.rewards.math.numbers.eval_arith`).

They share one grammar skeleton, usual precedence, binary operators left associative::

    expr    := term (("+" | "-") term)*
    term    := signed (("*" | "/" | "//") signed)*
    signed  := ("+" | "-")* primary                      (signs only where ``unary``)
    primary := atom "!"* [ "^" ("+" | "-")* primary ]    ("!", "^" only where enabled)
    atom    := NUMBER | "(" expr ")" | "{" expr "}" | "\\frac" "{" expr "}" "{" expr "}"

and differ where their callers really differ (:class:`Grammar`): which literals (integers
only, or decimals), unary signs, which operator spellings (``×``, ``\\cdot``, ``**``),
whether ``/`` is true division (a :class:`~fractions.Fraction`) or must divide integers
exactly, and the bounds that keep hostile input cheap (length, nesting, literal size, result
size).

:func:`parse` gives a tree (an int or Fraction leaf, ``(op, left, right)`` with ``op`` one of
``+ - * / // ^``, ``("neg", x)``, ``("!", x)``), the same shape as the arithmetic generator's
:data:`rlvr.tasks.arithmetic.Expr`; :func:`evaluate` computes while it parses (an evaluation
error such as a division by zero is raised where it occurs, before a later syntax error);
:func:`evaluate_tree` computes a parsed tree.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

__all__ = [
    "COUNTDOWN",
    "DECIMAL",
    "INTEGER",
    "LATEX",
    "ExactSyntaxError",
    "Expr",
    "Grammar",
    "Literal",
    "TooLarge",
    "evaluate",
    "evaluate_tree",
    "literals",
    "parse",
    "tokenize",
]

#: A parsed expression: an int / Fraction leaf, ``(op, left, right)``, ``("neg", x)`` or
#: ``("!", x)``.
Expr = int | Fraction | tuple


class ExactSyntaxError(ValueError):
    """The text is outside the grammar, or over one of its bounds (length, nesting, literal
    size), or (for an exact-division grammar) a ``/`` does not divide exactly."""


class TooLarge(ValueError):
    """Evaluating would build an astronomically large number (a power tower, a huge
    factorial): refused before the work is done."""


def _python_int(text: str) -> int:
    # int(text, 0) reads Python's integer literals: 1_000, 0x1f, 0o7, 0b1; "05" is an error.
    return int(text, 0)


@dataclass(frozen=True, eq=False)
class Grammar:
    """Where the grammars differ (see the module docstring for the shared skeleton).

    Attributes:
        name: a label.
        number: regex of one literal (matched at a token start).
        literal: turns a literal's text into its value (``int``, ``Fraction`` ...); a
            ``ValueError`` from it is a syntax error.
        operators: written operator -> canonical one (``+ - * / // ^ ! ( ) { } frac``);
            anything not listed is an unexpected character.
        ignored: tokens that are dropped (``\\left``, ``\\right``).
        unary: ``+`` / ``-`` signs before an operand are allowed.
        exact_division: ``/`` must divide integers exactly (else :class:`ExactSyntaxError`)
            and gives an int; otherwise ``/`` is true division on Fractions.
        max_chars: longer text is refused before tokenizing.
        max_nesting: parentheses / braces nested deeper are refused.
        max_tokens: more tokens are refused.
        max_literal_digits: a literal whose value has more digits is refused.
        max_bits: a product, quotient or power with a numerator or denominator of more bits
            raises :class:`TooLarge`.
        max_factorial: ``n!`` for a larger (or non-integer, negative) ``n`` raises
            :class:`TooLarge`.
        comment: a marker from which the rest of the line is ignored (Python's ``#``).
    """

    name: str
    number: str
    literal: Callable[[str], Any]
    operators: Mapping[str, str]
    ignored: tuple[str, ...] = ()
    unary: bool = True
    exact_division: bool = False
    max_chars: int | None = None
    max_nesting: int | None = None
    max_tokens: int | None = None
    max_literal_digits: int | None = None
    max_bits: int | None = None
    max_factorial: int | None = None
    comment: str | None = None
    _token: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Longest spelling first, so "**" wins over "*" and "//" over "/".
        words = sorted([*self.operators, *self.ignored], key=len, reverse=True)
        ops = "|".join(re.escape(w) for w in words)
        object.__setattr__(self, "_token", re.compile(rf"\s*(?:({self.number})|({ops}))"))

    @property
    def true_division(self) -> bool:
        return not self.exact_division


_BASIC = {"+": "+", "-": "-", "*": "*", "/": "/", "(": "(", ")": ")"}

#: Integers with ``+ - * / //``, signs and parentheses, ``/`` exact; Python's integer
#: literal forms and ``#`` comments (it replaced an ``ast`` reading); ``×``, ``·`` and ``÷``
#: as operators; literals of at most 30 digits.
INTEGER = Grammar(
    "integer",
    number=r"0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[0-9](?:_?[0-9])*",
    literal=_python_int,
    operators={**_BASIC, "//": "//", "×": "*", "·": "*", "÷": "/"},
    exact_division=True,
    comment="#",
    max_nesting=200,  # Python's parser refuses deeper parentheses
    max_literal_digits=30,
)

#: Non-negative integers, binary ``+ - * /`` (true division; also written ``× · ⋅ ÷`` and the
#: minus signs ``− –``), parentheses; no signs.
COUNTDOWN = Grammar(
    "countdown",
    number=r"[0-9]+",
    literal=int,
    operators={**_BASIC, "×": "*", "·": "*", "⋅": "*", "÷": "/", "−": "-", "–": "-"},
    unary=False,
    max_chars=200,
    max_nesting=50,
)

#: Decimal literals (``48``, ``1.5``, ``.5``, ``1.``), signs, ``+ - * /``, parentheses.
DECIMAL = Grammar(
    "decimal",
    number=r"\d+\.\d*|\.\d+|\d+",
    literal=Fraction,
    operators=_BASIC,
)

#: Numeric LaTeX / plain maths: decimals, signs, ``+ - * / ^ **``, ``\\cdot``, ``\\times``,
#: ``\\div``, ``\\frac{}{}``, parentheses, braces, factorial; at most 400 tokens, results
#: of at most 200,000 bits, factorials up to 3000!.
LATEX = Grammar(
    "latex",
    number=r"\d+\.\d*|\.\d+|\d+",
    literal=Fraction,
    operators={**_BASIC, "**": "^", "^": "^", "!": "!", "{": "{", "}": "}", "\\frac": "frac",
               "\\cdot": "*", "\\times": "*", "\\div": "/"},
    ignored=("\\left", "\\right"),
    max_tokens=400,
    max_bits=200_000,
    max_factorial=3000,
)


@dataclass(frozen=True)
class Literal:
    """A number in an expression: its character span in the text and its exact value."""

    start: int
    end: int
    value: Any


@dataclass(frozen=True)
class _Token:
    op: str | None  # the canonical operator, None for a literal
    text: str
    literal: Literal | None = None

    def shown(self) -> str:
        # How an error message names the token: a literal by its value, an operator quoted.
        if self.literal is not None:
            return repr(self.literal.value) if type(self.literal.value) is int else self.text
        return repr(self.text)


def tokenize(text: str, grammar: Grammar) -> list[_Token]:
    """The tokens of ``text`` (whitespace dropped, ``ignored`` tokens too).

    Raises:
        ExactSyntaxError: longer than ``max_chars``, a character outside the grammar
            (``unexpected character 'x'``), more than ``max_tokens`` tokens, or a literal
            over ``max_literal_digits``.
    """
    if grammar.max_chars is not None and len(text) > grammar.max_chars:
        raise ExactSyntaxError(f"expression longer than {grammar.max_chars} characters")
    if grammar.comment is not None and grammar.comment in text:
        # blanked, not cut, so literal spans keep their offsets
        text = re.sub(re.escape(grammar.comment) + r"[^\n]*", lambda m: " " * len(m[0]), text)
    tokens: list[_Token] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = grammar._token.match(text, pos)
        if not m:
            raise ExactSyntaxError(f"unexpected character {text[pos:].lstrip()[:1]!r}")
        pos = m.end()
        if m[1] is not None:
            try:
                value = grammar.literal(m[1])
            except ValueError:
                raise ExactSyntaxError(f"bad number {m[1][:20]!r}") from None
            if (grammar.max_literal_digits is not None
                    and abs(value) >= 10**grammar.max_literal_digits):
                raise ExactSyntaxError(f"number longer than {grammar.max_literal_digits} digits")
            tokens.append(_Token(None, m[1], Literal(m.start(1), m.end(1), value)))
        elif m[2] not in grammar.ignored:
            tokens.append(_Token(grammar.operators[m[2]], m[2]))
        if grammar.max_tokens is not None and len(tokens) > grammar.max_tokens:
            raise ExactSyntaxError(f"more than {grammar.max_tokens} tokens")
    return tokens


def literals(text: str, grammar: Grammar) -> list[Literal]:
    """The numbers of ``text``, in order, with their spans.

    Raises:
        ExactSyntaxError: as :func:`tokenize`.
    """
    return [t.literal for t in tokenize(text, grammar) if t.literal is not None]


# ----------------------------------------------------------------------------- builders
# The parser hands every leaf and operation to a builder: the tree builder records it, the
# value builder computes it at once (so evaluation errors surface in reading order).


class _TreeBuilder:
    def number(self, literal: Literal) -> Expr:
        return literal.value

    def binary(self, op: str, left: Expr, right: Expr) -> Expr:
        return ("/" if op == "frac" else op, left, right)

    def unary(self, op: str, operand: Expr) -> Expr:
        return (op, operand)


class _ValueBuilder:
    def __init__(self, grammar: Grammar, values: Sequence[Any] | None = None) -> None:
        self.g, self.values, self.next = grammar, values, 0

    def number(self, literal: Literal) -> Any:
        value = literal.value
        if self.values is not None:
            value = self.values[self.next]
            self.next += 1
        return Fraction(value) if self.g.true_division else value

    def binary(self, op: str, a: Any, b: Any) -> Any:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "^":
            return self._power(a, b)
        if op == "frac":  # \frac{a}{b}: a quotient with no size check (as it always was)
            if b == 0:
                raise ZeroDivisionError("division by zero")
            return a / b
        if op == "*":
            value = a * b
        else:  # "/" or "//"
            if b == 0:
                raise ZeroDivisionError("division by zero")
            if op == "//":
                value = a // b
            elif self.g.exact_division:
                if a % b:
                    raise ExactSyntaxError(f"{a} / {b} is not an integer")
                value = a // b
            else:
                value = a / b
        self._check_size(value)
        return value

    def unary(self, op: str, a: Any) -> Any:
        if op == "neg":
            return -a
        # "!": factorial
        if a.denominator != 1 or a < 0 or a > self.g.max_factorial:
            raise TooLarge("factorial")
        return Fraction(math.factorial(int(a)))

    def _check_size(self, v: Any) -> None:
        bits = self.g.max_bits
        if bits is not None and (v.numerator.bit_length() > bits
                                 or v.denominator.bit_length() > bits):
            raise TooLarge("value")

    def _power(self, base: Fraction, exp: Fraction) -> Fraction:
        if exp.denominator != 1:
            # irrational in general: not exact arithmetic
            raise ExactSyntaxError("fractional exponent")
        e = int(exp)
        if base in (0, 1) or base == -1:
            if base == 0 and e < 0:
                raise ZeroDivisionError("division by zero")
            return base ** e
        bits = max(base.numerator.bit_length(), base.denominator.bit_length())
        if self.g.max_bits is not None and abs(e) * bits > self.g.max_bits:
            raise TooLarge("power")
        return base ** e


# ----------------------------------------------------------------------------- parser

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2}
_CLOSE = {"(": ")", "{": "}"}


class _Parser:
    # Precedence climbing, and one function for everything below a binary operator, so a
    # nesting level costs two or three Python frames: Python's recursion limit is never the
    # first bound a deeply nested expression meets (the grammar's max_nesting is).

    def __init__(self, tokens: list[_Token], grammar: Grammar, build: Any) -> None:
        self.tokens, self.g, self.build = tokens, grammar, build
        self.i, self.depth = 0, 0

    def peek(self) -> str | None:
        # The canonical operator ahead, "" for a literal, None at the end.
        if self.i >= len(self.tokens):
            return None
        return self.tokens[self.i].op or ""

    def parse(self) -> Any:
        node = self.expr(1)
        if self.i != len(self.tokens):
            raise ExactSyntaxError(
                f"unexpected {self.tokens[self.i].shown()} after a full expression")
        return node

    def expr(self, min_prec: int) -> Any:
        node = self.operand()
        while (prec := _PRECEDENCE.get(self.peek() or "", 0)) >= min_prec:
            op = self.tokens[self.i].op
            self.i += 1
            node = self.build.binary(op, node, self.expr(prec + 1))
        return node

    def operand(self) -> Any:
        # signed := ("+" | "-")* primary;  primary := atom "!"* ["^" signed]
        signs = []
        while self.g.unary and self.peek() in ("+", "-"):
            signs.append(self.tokens[self.i].op)
            self.i += 1
        tok = self.tokens[self.i] if self.i < len(self.tokens) else None
        if tok is None:
            raise ExactSyntaxError("expression ends where a number or '(' is expected")
        self.i += 1
        if tok.literal is not None:
            node = self.build.number(tok.literal)
        elif tok.op in _CLOSE:
            self.open()
            node = self.expr(1)
            self.close(tok.op)
        elif tok.op == "frac":
            self.expect("{")
            self.open()
            num = self.expr(1)
            self.close("{")
            self.expect("{")
            self.open()
            den = self.expr(1)
            self.close("{")
            node = self.build.binary("frac", num, den)
        else:
            raise ExactSyntaxError(f"unexpected {tok.shown()} where a number or '(' is expected")
        while self.peek() == "!":
            self.i += 1
            node = self.build.unary("!", node)
        if self.peek() == "^":  # right associative, binds tighter than a sign on its left
            self.i += 1
            node = self.build.binary("^", node, self.operand())
        for sign in reversed(signs):
            if sign == "-":
                node = self.build.unary("neg", node)
        return node

    def open(self) -> None:
        self.depth += 1
        if self.g.max_nesting is not None and self.depth > self.g.max_nesting:
            raise ExactSyntaxError(f"parentheses nested deeper than {self.g.max_nesting}")

    def close(self, opening: str) -> None:
        self.expect(_CLOSE[opening])
        self.depth -= 1

    def expect(self, op: str) -> None:
        if self.peek() != op:
            raise ExactSyntaxError(f"missing {op!r}")
        self.i += 1


def _tokens(text: str, grammar: Grammar) -> list[_Token]:
    tokens = tokenize(text, grammar)
    if not tokens:
        raise ExactSyntaxError("empty expression")
    return tokens


def parse(text: str, grammar: Grammar) -> Expr:
    """Parse ``text`` into a tree (see the module docstring), computing nothing.

    Raises:
        ExactSyntaxError: empty, outside the grammar or over one of its bounds.
    """
    return _Parser(_tokens(text, grammar), grammar, _TreeBuilder()).parse()


def evaluate(text: str, grammar: Grammar, values: Sequence[Any] | None = None) -> Any:
    """Exact value of ``text``, computed while it is parsed.

    Args:
        text: e.g. ``"48/2"``, ``"(20/100)*25"``, ``"\\frac{3}{4} \\cdot 2^{10}"``.
        grammar: one of :data:`INTEGER`, :data:`COUNTDOWN`, :data:`DECIMAL`, :data:`LATEX`
            (or another :class:`Grammar`).
        values: optional replacement value for each literal, in order (re-running an
            expression with new numbers); defaults to the literals' own values.

    Returns:
        An int for an exact-division grammar, else a :class:`~fractions.Fraction`.

    Raises:
        ExactSyntaxError: input outside the grammar, a wrong number of ``values``, or an
            inexact ``/`` in an exact-division grammar.
        ZeroDivisionError: a division by zero (also ``0 ^ -1``).
        TooLarge: a result over ``max_bits`` or a factorial over ``max_factorial``.
    """
    tokens = _tokens(text, grammar) if values is None else tokenize(text, grammar)
    if values is not None:
        count = sum(t.literal is not None for t in tokens)
        if len(values) != count:
            raise ExactSyntaxError(f"{len(values)} values for {count} literals in {text!r}")
        if not tokens:
            raise ExactSyntaxError("empty expression")
    return _Parser(tokens, grammar, _ValueBuilder(grammar, values)).parse()


def evaluate_tree(tree: Expr, grammar: Grammar) -> Any:
    """Exact value of a tree from :func:`parse` under ``grammar``'s arithmetic.

    Raises:
        ZeroDivisionError, ExactSyntaxError, TooLarge: as :func:`evaluate`.
    """
    build = _ValueBuilder(grammar)
    if not isinstance(tree, tuple):
        return build.number(Literal(0, 0, tree))
    if len(tree) == 2:
        return build.unary(tree[0], evaluate_tree(tree[1], grammar))
    op, left, right = tree
    return build.binary(op, evaluate_tree(left, grammar), evaluate_tree(right, grammar))
