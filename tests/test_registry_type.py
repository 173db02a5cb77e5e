"""The one registry type (rlvr.registry.Registry) and what every kind built on it shares:
typed metadata, one did-you-mean, duplicate refusal, lazy entries, and config descriptions that
list the registered names."""

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlvr.registry import Entry, NoMeta, Registry, did_you_mean

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Speed:
    device: str
    fast: bool = False


@pytest.fixture
def engines():
    reg = Registry("rollout engine", Speed, field="rollout.engine")
    reg.register("torch", device="cpu", fast=True)(len)
    reg.register("hf", device="cpu")(abs)
    return reg


def test_entries_carry_their_typed_metadata(engines):
    assert engines.get("torch") is len
    assert engines.entry("hf") == Entry("hf", abs, Speed("cpu", False))
    assert engines.meta("torch") == Speed("cpu", True)
    assert engines.names() == ["hf", "torch"] and list(engines) == ["hf", "torch"]
    assert "torch" in engines and "vllm" not in engines and 3 not in engines
    assert len(engines) == 2


def test_metadata_keywords_are_checked_at_registration(engines):
    with pytest.raises(TypeError, match=r"rollout engine 'x': a rollout engine entry does not "
                                        r"take speed \(it takes: device, fast\)"):
        engines.register("x", device="cpu", speed=3)
    with pytest.raises(TypeError, match="rollout engine 'x': a rollout engine entry needs device"):
        engines.register("x", fast=True)
    with pytest.raises(TypeError, match="metadata must be a Speed, got NoMeta"):
        engines.add("x", max, NoMeta())
    with pytest.raises(TypeError, match="does not take options .it takes: nothing but"):
        Registry("widget").register("y", options=None)
    with pytest.raises(TypeError, match="meta must be a dataclass"):
        Registry("widget", dict)
    assert "x" not in engines and "y" not in engines


def test_duplicates_are_refused_but_the_same_object_may_register_again(engines):
    with pytest.raises(ValueError, match="rollout engine 'torch' is already registered"):
        engines.register("torch", device="cuda")(max)
    engines.register("torch", device="cuda")(len)  # a module imported twice
    assert engines.meta("torch") == Speed("cuda", False)
    with pytest.raises(ValueError, match="expected a non-empty string"):
        engines.register(" ", device="cpu")(max)


def test_identity_decides_what_counts_as_the_same_registration():
    class Source:
        pass

    reg = Registry("task source", identity=type)
    reg.add("a", Source())
    reg.add("a", Source())  # another instance of the same class: the same source
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", object())


def test_unknown_names_name_the_field_the_closest_and_all(engines):
    with pytest.raises(KeyError) as err:
        engines.get("trch")
    assert err.value.args[0] == ("rollout.engine: unknown rollout engine 'trch'; did you mean "
                                 "'torch'? registered: hf, torch")
    assert engines.unknown_message("zzz") == (
        "rollout.engine: unknown rollout engine 'zzz'; registered: hf, torch")
    assert engines.unknown_message("trch", field="--engine").startswith("--engine: unknown")
    assert engines.unknown_message("trch", field="").startswith("unknown rollout engine")
    with pytest.raises(ValueError, match="^env: unknown rollout engine 'hff'; did you mean 'hf'"):
        engines.check("hff", "env")
    engines.check("hf")  # registered: no error
    assert Registry("tool").unknown_message("x") == "unknown tool 'x'; registered: none"


def test_the_error_class_is_the_kinds():
    class UnknownEngine(ValueError):
        pass

    reg = Registry("rollout engine", error=UnknownEngine)
    with pytest.raises(UnknownEngine, match="unknown rollout engine 'x'"):
        reg.get("x")


def test_did_you_mean_by_hand():
    assert did_you_mean("calculater", ["python", "calculator"]) == "; did you mean 'calculator'?"
    assert did_you_mean("zz", ["python", "calculator"]) == ""
    # difflib's ratio of "dapo2" / "dapo" is 2 * 4 / 9 = 0.89: above 0.75, so suggested
    assert did_you_mean("dapo2", ["dapo"], cutoff=0.75) == "; did you mean 'dapo'?"
    assert did_you_mean("dapo2", ["dapo"], cutoff=0.9) == ""


def test_ordered_registries_keep_registration_order_and_one_of_lists_them():
    reg = Registry("task source", ordered=True)
    for name in ("zeta", "alpha", "mid"):
        reg.add(name, name.upper())
    assert reg.names() == ["zeta", "alpha", "mid"]
    assert reg.one_of() == "one of: `zeta`, `alpha`, `mid`"
    reg.unregister("alpha")
    reg.unregister("never-registered")  # ignored
    assert reg.names() == ["zeta", "mid"]


def test_lazy_entries_load_on_first_get_with_their_declared_metadata(engines):
    calls = []

    def load():
        calls.append(1)
        engines.register("vllm", device="cuda")(max)

    engines.lazy("vllm", load, device="cuda")
    assert "vllm" in engines and engines.meta("vllm") == Speed("cuda") and not calls
    assert engines.get("vllm") is max and engines.get("vllm") is max
    assert calls == [1]  # loaded once
    engines.lazy("broken", lambda: None, device="cpu")
    with pytest.raises(RuntimeError, match="rollout engine 'broken': its loader .* registered "
                                           "nothing"):
        engines.get("broken")
    engines.lazy("other", load, device="cpu")
    with pytest.raises(ValueError, match="'vllm' is already registered"):
        engines.lazy("vllm", load, device="cuda")
    with pytest.raises(ValueError, match="registers Speed.*declared with Speed"):
        engines.register("other", device="cuda")(min)  # metadata other than declared


def test_config_descriptions_list_every_registered_name():
    # In a fresh interpreter (this one may hold other tests' registrations): each registry-
    # backed field's description holds "one of: ..." with exactly the registered names.
    code = """
from rlvr.algo import registry as algo
from rlvr.envs import EnvConfig
from rlvr.envs.registry import ENVIRONMENTS
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.registry import FORMAT_RULES, REWARD_AGGREGATORS, VERIFIERS
from rlvr.rollout import ENGINES
from rlvr.tasks.config import DataConfig
from rlvr.tasks.registry import SOURCES
from rlvr.tools import TOOLS
from rlvr.train.config import AlgoConfig, RolloutConfig

fields = [(AlgoConfig, "advantage", algo.ADVANTAGE_ESTIMATORS),
          (AlgoConfig, "policy_loss", algo.POLICY_LOSSES),
          (AlgoConfig, "loss_agg", algo.LOSS_AGGREGATIONS),
          (AlgoConfig, "kl_estimator", algo.KL_ESTIMATORS),
          (RolloutConfig, "engine", ENGINES),
          (RewardConfig, "aggregator", REWARD_AGGREGATORS),
          (RewardConfig, "format_rule", FORMAT_RULES),
          (RewardConfig, "verifiers", VERIFIERS),
          (DataConfig, "source", SOURCES),
          (EnvConfig, "name", ENVIRONMENTS),
          (EnvConfig, "tools", TOOLS)]
for model, field, registry in fields:
    description = model.model_fields[field].description
    listed = description.split("one of: ", 1)[1]
    print(field, registry.one_of() in description and len(registry) > 1,
          all(f"`{name}`" in listed for name in registry.names()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:-1] == [
        f"{field} True True" for field in ("advantage", "policy_loss", "loss_agg",
                                           "kl_estimator", "engine", "aggregator",
                                           "format_rule", "verifiers", "source", "name",
                                           "tools")]


def test_the_policy_loss_description_names_cispo():
    from rlvr.train.config import AlgoConfig

    assert "`cispo`" in AlgoConfig.model_fields["policy_loss"].description


def test_sample_aggregators_are_the_ones_rlvr_eval_documents():
    from rlvr.eval.metrics import SAMPLE_AGGREGATORS

    assert SAMPLE_AGGREGATORS.names() == ["any_passes", "best_of_logprob", "best_of_oracle",
                                          "best_of_reranker", "majority"]


def test_checking_a_config_loads_no_heavy_builtin():
    # The math verifier (sympy), the code verifier and the python tool (the sandbox) are
    # declared lazily: their names validate without importing them; scoring loads them.
    code = ("import sys\n"
            "from rlvr.train.config import RunConfig\n"
            "RunConfig.model_validate({'env': {'name': 'tool'}, "
            "'reward': {'format_rule': {'code': 'code_block'}}})\n"
            "print(sorted(m for m in ('sympy', 'rlvr.sandbox', 'rlvr.rewards.math_task', "
            "'rlvr.tools.python_tool') if m in sys.modules))\n"
            "from rlvr.rewards.registry import VERIFIERS\n"
            "print(VERIFIERS.get('math')('#### 4', '4').status, 'sympy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "correct True"]


def test_no_registry_is_hand_rolled():
    # one did-you-mean: difflib appears only in the registry module, the config loader (unknown
    # keys) and the reasoning-gym dataset lookup (a library's table)
    users = sorted(str(p.relative_to(ROOT / "src")) for p in (ROOT / "src").rglob("*.py")
                   if "difflib" in p.read_text())
    assert users == ["rlvr/configio.py", "rlvr/registry.py", "rlvr/tasks/gym.py"]
    # built-ins load by plain imports, never importlib by name at first lookup
    lookups = sorted(str(p.relative_to(ROOT / "src")) for p in (ROOT / "src").rglob("*.py")
                     if "registry" in p.name and "import_module" in p.read_text())
    assert lookups == ["rlvr/registry.py"]  # load_plugins: the user's modules
