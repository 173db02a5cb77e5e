"""A small multi-turn ``verifiers`` environment module for the tests (no hub download):
guess a secret number. ``load_environment(n=..., max_turns=..., kind=...)``:

- each row asks for a number between 1 and 20 (``answer``: the secret);
- ``env_response`` reads the last assistant message's last integer and answers ``higher``,
  ``lower`` or ``No number.``; it counts the guesses in ``state["guesses"]`` (set up by
  ``setup_state``), state the rubric reads;
- a stop condition ``guessed`` ends the rollout when the last guess is the secret, and the
  environment's ``max_turns`` ends it otherwise;
- the rubric: ``solved`` (1.0 iff the last guess is the secret) weight 0.7 and ``efficiency``
  (``1 / guesses``, from the state) weight 0.3.

``kind="final"``: a correct guess gets a ``final_env_response`` ("Correct!") instead of the
stop condition; ``kind="client"``: env_response calls the model client, which rlvr has not.
"""

from __future__ import annotations

import re

import verifiers as vf
from datasets import Dataset

SYSTEM = "Guess the secret number; reply with one integer."


def last_int(text: str | None) -> int | None:
    """The last integer in ``text``; None without one."""
    found = re.findall(r"-?\d+", text or "")
    return int(found[-1]) if found else None


def _last_guess(messages) -> int | None:
    for message in reversed(messages):
        if message.role == "assistant":
            return last_int(message.content)
    return None


def solved(completion, answer, **kwargs) -> float:
    """1.0 iff the last assistant guess is the secret."""
    return 1.0 if _last_guess(completion) == int(answer) else 0.0


def efficiency(state, **kwargs) -> float:
    """1 / the number of guesses env_response counted (0 without any)."""
    guesses = state.get("guesses", 0)
    return 1.0 / guesses if guesses else 0.0


class Guess(vf.MultiTurnEnv):
    """Higher / lower: see the module docs."""

    def __init__(self, kind: str = "stop", **kwargs):
        super().__init__(**kwargs)
        self.kind = kind

    async def setup_state(self, state):
        state["guesses"] = 0
        return state

    @vf.stop
    async def guessed(self, state) -> bool:
        if self.kind == "final" or not state["trajectory"]:
            return False
        return _last_guess(state["trajectory"][-1]["completion"]) == int(state["answer"])

    async def env_response(self, messages, state, **kwargs):
        if self.kind == "client":
            await state["client"].get_response(messages, "m")
        guess = _last_guess(messages)
        state["guesses"] += guess is not None
        secret = int(state["answer"])
        if guess == secret and self.kind == "final":
            state["final_env_response"] = [vf.UserMessage(role="user", content="Correct!")]
            return state["final_env_response"]
        text = "No number." if guess is None else "higher" if guess < secret else "lower"
        return [vf.UserMessage(role="user", content=text)]


def load_environment(n: int = 12, max_turns: int = 4, kind: str = "stop") -> vf.Environment:
    rows = [{"question": f"Guess my number between 1 and 20 (game {i}).",
             "answer": str(1 + (7 * i + 3) % 20)} for i in range(n)]
    rubric = vf.Rubric(funcs=[solved, efficiency], weights=[0.7, 0.3])
    return Guess(kind=kind, dataset=Dataset.from_list(rows), system_prompt=SYSTEM,
                 rubric=rubric, max_turns=max_turns)
