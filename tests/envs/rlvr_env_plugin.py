"""Tools and an environment for the environment tests, loaded through ``EnvConfig.plugins``
(the environments guide's examples, and tools that misbehave)."""

import re
import threading

from rlvr.envs import Environment, register_env
from rlvr.tools import register_tool

RELEASE = threading.Event()  # test_hang waits on it (set by the tests when they end)


@register_tool("word_count", description="counts the words of a text", timeout_s=2.0)
def word_count(text: str) -> str:
    return str(len(text.split()))


@register_tool("test_hang", description="never answers")
def hang(text: str) -> str:
    RELEASE.wait(60)
    return "too late"


@register_tool("test_boom", description="raises")
def boom(text: str) -> str:
    raise RuntimeError(f"cannot handle {text!r}")


@register_tool("test_flood", description="a megabyte of text")
def flood(text: str) -> str:
    return text * 1_000_000


@register_env
class Guess(Environment):
    """The model guesses the task's reference number; the user says higher or lower."""

    name = "test_guess"

    def parse_action(self, episode, text):
        m = re.search(r"#### (-?\d+)", text)
        if m is None or int(m.group(1)) == int(episode.task.reference):
            return None                              # no guess, or the right one: scored
        return int(m.group(1))

    def respond(self, episodes, guesses):
        return [{"role": "user",
                 "content": "higher" if g < int(e.task.reference) else "lower"}
                for e, g in zip(episodes, guesses)]
