"""A scripted environment and a verifier for the multi-turn training tests, loaded through
``env.plugins`` / ``reward.plugins``:

- ``test_first_call``: the ``tool`` environment, except that the first turn always calls the
  calculator (a tiny random model seldom writes a call, and seldom ends a turn with its stop
  token), so every episode is multi-turn and has a real tool observation inserted;
- ``test-chars``: partial credit that differs between random completions (the share of
  letters among the first 8 characters), so that GRPO groups have reward variance and the
  tiny model's steps update it.
"""

from rlvr.envs import Turn, register_env
from rlvr.envs.tool_calls import ToolCall
from rlvr.envs.tool_env import ToolEnv
from rlvr.rewards.registry import VERIFIERS, register_verifier
from rlvr.rewards.types import Status, Verdict

EXPRESSION = "2 + 3"
CHARS = "test-chars"

if CHARS not in VERIFIERS:
    @register_verifier(CHARS, format_rule="none")
    def chars(completion: str, reference, **options) -> Verdict:
        head = completion[:8].ljust(8)
        share = sum(ch.isalpha() for ch in head) / 8
        return Verdict(Status.correct if share == 1.0 else Status.wrong, head, "test",
                       score=share)


@register_env
class FirstCallEnv(ToolEnv):
    """The first turn: ``<calculator>2 + 3</calculator>`` whatever was sampled (a turn the
    engine cut counts as ended, so the call is made); later turns: the ``tool`` environment's
    rules."""

    name = "test_first_call"

    def step_many(self, episodes, turns):
        turns = [Turn(t.text, t.tokens, "stop") if e.turns == 0 else t
                 for e, t in zip(episodes, turns)]
        return super().step_many(episodes, turns)

    def parse_action(self, episode, text):
        if episode.turns == 1:
            return [ToolCall("calculator", {"expression": EXPRESSION})]
        return super().parse_action(episode, text)
