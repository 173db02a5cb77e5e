"""The math verifier's settings (:class:`MathVerifyConfig`), apart from the verifier: the
reward registry declares them with the ``math`` verifier, and a config's
``reward.verifier_options.math`` is checked against them, without importing the verifier's
symbolic comparison (sympy, about a second)."""

from __future__ import annotations

from dataclasses import dataclass

from .outcome import Policy


@dataclass(frozen=True)
class MathVerifyConfig:
    """Settings of the math verifier. The defaults implement the project's labelling policy
    (``shared/cases/README.md``); change them only deliberately.

    Attributes:
        allow_last_number: when the completion has no marked answer (no box, no ``####``, no
            "the answer is", no answer tags) and is not a short answer-only response, credit
            the last number in the text. Off by default: a value that merely occurs in long
            reasoning is not an answer, and rewarding it teaches the model to hedge.
        exact_sig_digits: a decimal response to an exact reference (integer, fraction,
            radical, pi, e) counts only if its relative error is below ``5 * 10^-n``; with
            9, ``0.333333333`` passes for ``1/3`` and ``3.14`` fails for ``\\pi``.
        rounded_reference_tolerance: a reference written as a decimal with ``d`` decimals is
            treated as rounded and accepts any response within ``0.5 * 10^-d`` of it
            (``3.14`` accepts ``3.14159`` and ``\\pi``, rejects ``3.15`` and ``3.1``). When
            False, decimal references are treated as exact values.
        max_input_chars: completions longer than this are not searched at all and score
            ``unparsed`` (guard against pathological outputs; 500k characters by default).
        max_answer_chars: extracted answers longer than this are compared as strings only.
        accept_unevaluated: a response that is arithmetic still to be done (``81 * 7``,
            ``(9+1)``) equals a numeric reference of the same value. True by default, as in
            Math-Verify and the shared cases; set False when training on tasks whose question
            *is* the arithmetic (the arithmetic generator, GSM8K): there, repeating the
            question's operation would otherwise earn the full reward. The training presets
            set it False (``reward.verifier_options: {math: {accept_unevaluated: false}}``).
    """

    allow_last_number: bool = False
    exact_sig_digits: int = 9
    rounded_reference_tolerance: bool = True
    max_input_chars: int = 500_000
    max_answer_chars: int = 2_000
    accept_unevaluated: bool = True

    @property
    def policy(self) -> Policy:
        return Policy(self.exact_sig_digits, self.rounded_reference_tolerance,
                      self.accept_unevaluated)
