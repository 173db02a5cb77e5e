"""EnvConfig: defaults, the names it checks (after plugins), ranges; the environment
registry."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvr.envs import (
    EnvConfig,
    Environment,
    SingleTurnEnv,
    ToolEnv,
    Turn,
    env_class,
    env_names,
    register_env,
    unregister_env,
)
from rlvr.records import Task


def test_defaults():
    config = EnvConfig()
    assert (config.name, config.max_turns, config.max_episode_tokens) == ("single_turn", 4, None)
    assert (config.tool_timeout_s, config.tool_output_bytes) == (10.0, 1024)
    assert (config.tools, config.max_calls_per_turn) == (["calculator", "python"], 4)
    assert (config.end_on_tool_timeout, config.observation_role) == (False, "tool")
    assert (config.system_prompt, config.tool_workers, config.plugins) == (None, None, [])


def test_builtins_are_registered():
    assert {"single_turn", "tool"} <= set(env_names())
    assert env_class("single_turn") is SingleTurnEnv and env_class("tool") is ToolEnv


@pytest.mark.parametrize("settings, message", [
    # the built-ins and whatever other tests in this process registered
    ({"name": "tools"}, ("name: unknown environment 'tools'; did you mean 'tool'? "
                         "registered: ")),
    ({"tools": ["calculater"]}, "tools: unknown tool 'calculater'; did you mean 'calculator'?"),
    ({"tools": ["python", "python"]}, "tools: 'python' is listed twice"),
    ({"plugins": ["no_such_module_here"]}, "plugins: cannot import no_such_module_here"),
    ({"max_turns": 0}, "max_turns\n  Input should be greater than or equal to 1"),
    ({"max_episode_tokens": 0}, "max_episode_tokens\n  Input should be greater than or equal to 1"),
    ({"tool_timeout_s": 0}, "tool_timeout_s\n  Input should be greater than 0"),
    ({"tool_output_bytes": 100},
     "tool_output_bytes\n  Input should be greater than or equal to 256"),
    ({"observation_role": "system"}, "observation_role\n  Input should be 'tool' or 'user'"),
    ({"max_turn": 3}, "max_turn\n  Extra inputs are not permitted"),
])
def test_bad_settings_name_the_field(settings, message):
    with pytest.raises(ValidationError) as info:
        EnvConfig(**settings)
    assert message in str(info.value)


def test_validation_does_not_import_the_sandbox():
    # the python tool (and the sandbox behind it, ~40 ms) loads when an environment uses it,
    # not when a config naming it is checked: a run config's start-up stays as cheap as today
    code = ("import sys; from rlvr.envs import EnvConfig; EnvConfig(name='tool'); "
            "print('rlvr.sandbox' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_plugins_register_tools_and_environments():
    config = EnvConfig(name="test_guess", tools=["word_count"], plugins=["rlvr_env_plugin"])
    assert config.name == "test_guess" and "test_guess" in env_names()


def test_the_registry_refuses_nameless_and_duplicate_classes():
    class Nameless(Environment):
        pass

    class Other(Environment):
        name = "single_turn"

    with pytest.raises(ValueError, match="needs a class attribute `name`"):
        register_env(Nameless)
    with pytest.raises(ValueError, match="'single_turn' is already registered"):
        register_env(Other)
    with pytest.raises(KeyError, match="unknown environment 'singleturn'; did you mean "
                                       "'single_turn'"):
        env_class("singleturn")


def test_register_and_unregister():
    @register_env
    class Echo(Environment):
        name = "test_echo"

    try:
        assert env_class("test_echo") is Echo and EnvConfig(name="test_echo").name == "test_echo"
    finally:
        unregister_env("test_echo")
    assert "test_echo" not in env_names()


def test_an_environment_that_parses_must_respond():
    class Half(Environment):
        name = "test_half"

        def parse_action(self, episode, text):
            return text

    task = Task(id="1", prompt="p", reference="1", task_type="math", source="s")
    env = Half(EnvConfig(), rewards=None)
    with pytest.raises(NotImplementedError, match="Half parses actions but has no respond"):
        env.step(env.start(task), Turn("x", 1))
