"""Config loading: YAML + --set overrides, and errors that name the field and the fix."""

import re

import pytest
import yaml

from rlvr.configio import ConfigError, apply_overrides, load_config, parse_override
from rlvr.rewards.config import RewardConfig


def test_parse_override_parses_values_as_yaml():
    assert parse_override("reward.timeout_s=0.5") == (["reward", "timeout_s"], 0.5)
    assert parse_override("a.b=true") == (["a", "b"], True)
    assert parse_override("a=[1, 2]") == (["a"], [1, 2])
    assert parse_override("a=x=y") == (["a"], "x=y")
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_override("novalue")


def test_overrides_apply_in_order_and_create_nested_keys():
    data = {"weights": {"outcome": 1.0}}
    apply_overrides(data, ["weights.format=0.2", "format_rule.math=boxed", "weights.format=0.05"])
    assert data == {"weights": {"outcome": 1.0, "format": 0.05}, "format_rule": {"math": "boxed"}}


def test_yaml_file_with_section_and_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("reward:\n  timeout_s: 3\n  weights: {outcome: 1.0, format: 0.2}\n")
    config = load_config(RewardConfig, path, ["timeout_s=4"], section="reward")
    assert config.timeout_s == 4.0 and config.weights["format"] == 0.2


def test_typo_names_the_closest_valid_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("timeout_sec: 3\n")
    with pytest.raises(ConfigError, match=r"run.yaml: timeout_sec: unknown key; did you mean "
                                          r"'timeout_s'\?"):
        load_config(RewardConfig, path)


@pytest.mark.parametrize("text", ["", "# just a comment\n", "{}\n"])
def test_a_config_file_without_settings_is_refused(tmp_path, text):
    # an empty file silently ran the built-in defaults (not the default preset)
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"empty.yaml: holds no settings"):
        load_config(RewardConfig, path)


def test_wrong_type_names_field_and_value():
    with pytest.raises(ConfigError,
                       match=r"--set 'workers=many': workers: .*integer.*\(got 'many'\)"):
        load_config(RewardConfig, None, ["workers=many"])


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(RewardConfig, tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(RewardConfig, bad)


def test_overrides_index_lists_and_name_a_bad_index():
    from rlvr.configio import ConfigError, apply_overrides

    data = {"data": {"sources": [{"source": "gsm8k", "weight": 0.7}, {"source": "mbpp"}]}}
    apply_overrides(data, ["data.sources.1.weight=0.3", "data.sources.0.path=/x"])
    assert data["data"]["sources"] == [{"source": "gsm8k", "weight": 0.7, "path": "/x"},
                                       {"source": "mbpp", "weight": 0.3}]
    with pytest.raises(ConfigError, match="data.sources is a list of 2; '2' is not an index"):
        apply_overrides(data, ["data.sources.2.weight=1"])


def test_a_problem_from_an_override_names_the_override_not_the_file(tmp_path):
    from rlvr.train.config import RunConfig

    path = tmp_path / "run.yaml"
    path.write_text("model:\n  name: tiny-random\ngrpo:\n  steps: 2\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path, ["grpo.steps=3", "model.bf16=false"])
    assert str(err.value).startswith("--set 'model.bf16=false': model: ")
    assert "use model.precision: fp32" in str(err.value)
    path.write_text("model:\n  name: tiny-random\n  bf16: true\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path, ["grpo.steps=3"])
    assert str(err.value).startswith(f"{path}: model: ")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, None, ["grpo.steps=-1"])
    assert str(err.value).startswith("--set 'grpo.steps=-1': grpo.steps: ")


def test_a_check_of_the_whole_config_is_one_line_naming_its_field(tmp_path):
    # a jsonl source without a path named data.path but dumped the whole
    # config dict after it ("(got {'name': ..., 'model': ...})")
    from rlvr.train.config import RunConfig

    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, None, ["data.source=jsonl"])
    text = str(err.value)
    assert text == "--set 'data.source=jsonl': data.path: required for data.source='jsonl'"
    path = tmp_path / "run.yaml"
    path.write_text("data:\n  source: jsonl\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path)
    assert str(err.value) == f"{path}: data.path: required for data.source='jsonl'"
    # a section's own check: the field is put under the section, the section's dict not shown
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, None, ["algo.kl_controller=adaptive", "algo.kl_coef=0"])
    text = str(err.value)
    assert "\n" not in text and "{" not in text, text
    assert "algo.kl_controller: adaptive needs kl_coef > 0" in text, text


@pytest.mark.parametrize("override, hint", [
    ("grpo.beta=0.04", "grpo.beta: unknown key; TRL's beta is rlvr's algo.kl_coef"),
    ("num_generations=8", "TRL's num_generations is rlvr's grpo.group_size"),
    ("grpo.max_completion_length=256", "TRL's max_completion_length is rlvr's "
                                       "grpo.max_new_tokens"),
    ("algo.epsilon=0.2", "TRL's epsilon is rlvr's algo.clip_eps"),
    ("grpo.num_iterations=2", "TRL's num_iterations is rlvr's grpo.mu"),
    ("algo.loss_type=dapo", "TRL's loss_type is rlvr's algo.loss_agg"),
    ("scale_rewards=batch", "TRL's scale_rewards is rlvr's algo.std_scale"),
    ("lr_scheduler_type=cosine", "TRL's lr_scheduler_type is rlvr's grpo.lr_schedule"),
    ("per_device_train_batch_size=8", "grpo.prompts_per_step x grpo.group_size"),
    ("max_prompt_length=512", "rlvr does not truncate prompts"),
    ("bf16=true", "TRL's bf16 is rlvr's model.precision"),
])
def test_trl_names_get_the_rlvr_key(override, hint):
    from rlvr.train.config import RunConfig

    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, None, [override])
    assert str(err.value).startswith(f"--set {override!r}: ")
    assert hint in str(err.value)


@pytest.mark.parametrize("override, hint", [
    ("kl_coef=0.1", "kl_coef: unknown key at the top level; did you mean algo.kl_coef?"),
    ("grpo.kl_coef=0.1", "grpo.kl_coef: unknown key in grpo; did you mean algo.kl_coef?"),
    ("learning_rate=1e-5", "did you mean sft.learning_rate or grpo.learning_rate?"),
    ("temperature=0.9", "did you mean grpo.temperature or eval.temperature?"),
    ("top_p=0.9", "did you mean grpo.top_p?"),
    ("kl_coeff=0.1", "kl_coeff: unknown key at the top level; did you mean algo.kl_coef?"),
])
def test_a_known_key_in_the_wrong_section_names_its_section(override, hint):
    from rlvr.train.config import RunConfig

    with pytest.raises(ConfigError, match=re.escape(hint)):
        load_config(RunConfig, None, [override])


def test_a_problem_of_the_file_is_not_blamed_on_an_unrelated_override(tmp_path):
    """Checks of a whole section or config are blamed on the --set that they name, else on
    the file; an override of another key is not the culprit."""
    from rlvr.train.config import RunConfig

    path = tmp_path / "run.yaml"
    path.write_text("algo:\n  loss_agg: dapo2\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path, ["grpo.steps=3"])
    assert str(err.value).startswith(f"{path}: algo.loss_agg: unknown loss aggregation 'dapo2'")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path, ["grpo.steps=3", "algo.loss_agg=x"])
    assert str(err.value).startswith("--set 'algo.loss_agg=x': algo.loss_agg: unknown loss "
                                    "aggregation 'x'")
    path.write_text("algo:\n  kl_controller: adaptive\n  kl_coef: 0\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path, ["algo.clip_eps=0.3"])
    assert str(err.value) == (f"{path}: algo.kl_controller: adaptive needs kl_coef > 0 (its "
                              f"starting value)")
    path.write_text("algo:\n  kl_controller: adaptive\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, path, ["algo.clip_eps=0.3", "algo.kl_coef=0"])
    assert str(err.value).startswith("--set 'algo.kl_coef=0': algo.kl_controller")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, None, ["data.source=gsm8k", "grpo.steps=2"])
    assert str(err.value) == ("--set 'data.source=gsm8k': data.path: required for "
                              "data.source='gsm8k'")


def test_a_set_value_with_a_hash_is_taken_as_written():
    # YAML would read " ####" as a comment and cut the instruction to "Reply with"
    from rlvr.configio import parse_override

    assert parse_override("data.instruction=Reply with #### <answer>") == (
        ["data", "instruction"], "Reply with #### <answer>")
    assert parse_override("grpo.steps=3") == (["grpo", "steps"], 3)


def test_changing_the_task_source_drops_the_preset_mixtures(tmp_path):
    """The default preset's arithmetic mixtures (validation and GRPO training) do not follow
    ``--set data.source`` / ``data.path`` to another source: the new source's defaults apply,
    and mixtures named in ``--set`` are kept (and checked)."""
    from rlvr.train.config import RunConfig

    preset = tmp_path / "preset.yaml"
    preset.write_text("data:\n  source: arithmetic\n  mixture: '2d+-2d'\n"
                      "  train_mixture: '2d+2d:1,2d-2d:2'\n  instruction: 'Answer as #### N.'\n")
    logic = load_config(RunConfig, preset, ["data.source=logic"]).data
    assert (logic.mixture, logic.train_mixture) == ("countdown-3:0.5,kk-3:0.5", None)
    files = load_config(RunConfig, preset, ["data.source=jsonl", "data.path=x.jsonl"]).data
    assert files.train_mixture is None and files.path == "x.jsonl"
    same = load_config(RunConfig, preset, ["data.source=arithmetic"]).data
    assert (same.mixture, same.train_mixture) == ("2d+-2d", "2d+2d:1,2d-2d:2")
    assert same.instruction == "Answer as #### N."
    path = load_config(RunConfig, preset, ["data.path=tasks.jsonl"]).data
    assert path.train_mixture is None and path.instruction == "Answer as #### N."
    chosen = load_config(RunConfig, preset, ["data.source=logic", "data.train_mixture=kk-2"])
    assert chosen.data.train_mixture == "kk-2"
    with pytest.raises(ConfigError, match="(?s)data.train_mixture.*only for a generated source"):
        load_config(RunConfig, preset, ["data.source=jsonl", "data.path=x.jsonl",
                                        "data.train_mixture=2d-2d"])


@pytest.mark.parametrize("value, message", [
    ("{easy: -1}", "easy: expected a finite weight >= 0, got -1.0"),
    ("{easyy: 1}", "easyy: not a tier"),
    ("{easy: 0, medium: 0, hard: 0}", "every weight is 0"),
])
def test_tier_weights_are_checked(value, message):
    from rlvr.train.config import RunConfig

    with pytest.raises(ConfigError, match=re.escape(f"data.tier_weights: {message}")):
        load_config(RunConfig, None, [f"data.tier_weights={value}"])


# A boolean is not a number: pydantic's lax mode read `--set grpo.steps=true` as one step
#. Refused for every numeric field of every config model
# (rlvr.configio.ConfigModel), through --set and a YAML file alike, naming the field.
BOOL_FOR_NUMBER = [
    ("grpo.steps", "true", "grpo.steps"),                       # int
    ("grpo.learning_rate", "false", "grpo.learning_rate"),      # float
    ("grpo.micro_batch_tokens", "true", "grpo.micro_batch_tokens"),  # int | None
    ("algo.tis_cap", "true", "algo.tis_cap"),                   # float | None
    ("reward.timeout_s", "yes", "reward.timeout_s"),            # YAML 1.1 yes is a boolean
    ("reward.weights", "{outcome: 1.0, format: true}", "reward.weights: format"),
    ("reward.timeout_overrides_s", "{code: true}", "reward.timeout_overrides_s: code"),
    ("data.tier_weights", "{easy: true}", "data.tier_weights: easy"),
    ("data.sources", "[{source: arithmetic, weight: true}]", "data.sources.0.weight"),
    ("health.kl_spike.max_kl", "true", "health.kl_spike.max_kl"),
    ("env.max_turns", "true", "env.max_turns"),
    ("logging.tensorboard", "1", None),                         # a bool field reads 1 as true
    ("grpo.steps", "'5'", None),                                # a number as a string is read
    ("grpo.learning_rate", "'1e-6'", None),
]


@pytest.mark.parametrize("key, value, field", BOOL_FOR_NUMBER)
@pytest.mark.parametrize("via", ["set", "yaml"])
def test_a_boolean_is_not_a_number(tmp_path, key, value, field, via):
    from rlvr.train.config import RunConfig

    overrides = [f"{key}={value}"] + (["env.name=tool"] if key.startswith("env.") else [])
    path = None
    if via == "yaml":
        data = apply_overrides({}, overrides)
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(data))
        overrides = []
    if field is None:
        load_config(RunConfig, path, overrides)
        return
    source = re.escape(f"--set '{key}={value}'") if via == "set" else r".*run\.yaml"
    with pytest.raises(ConfigError, match=rf"{source}: {re.escape(field)}: expected a number, "
                                          r"not a boolean \(got "):
        load_config(RunConfig, path, overrides)


@pytest.mark.parametrize("key, value, message", [
    ("grpo.steps", "1.5", "fractional part"),           # lax mode: 1.5 is not an int
    ("reward.timeout_s", "fast", "valid number"),
    ("grpo.learning_rate", ".inf", "finite number"),    # passed gt=0 before
    ("model.lora_alpha", "inf", "finite number"),
    ("algo.kl_coef", ".nan", "finite number"),
    ("reward.weights", "{outcome: .inf}", "finite number"),
])
def test_wrong_numbers_are_refused(key, value, message):
    from rlvr.train.config import RunConfig

    with pytest.raises(ConfigError, match=rf"{re.escape(key)}.*{message}"):
        load_config(RunConfig, None, [f"{key}={value}"])


# The clip fields mean what the chosen loss reads them as (its registered options): refused
# where wrong for that loss, naming both fields and their values; never for cispo, whose
# clip_eps_high is an importance-weight cap (and which reads no clip_eps).
@pytest.mark.parametrize("overrides, message", [
    (["algo.policy_loss=clip_higher", "algo.clip_eps_high=0.1"],
     "algo.clip_eps_high: 0.1 < clip_eps 0.2 with policy_loss clip_higher"),
    (["algo.policy_loss=clip_higher", "algo.clip_eps=0.3"],
     "algo.clip_eps_high: 0.28 < clip_eps 0.3 with policy_loss clip_higher"),
    (["algo.clip_eps=1.5"], "algo.clip_eps: 1.5 with policy_loss clip"),
    (["algo.policy_loss=dual_clip", "algo.clip_eps=1"], "algo.clip_eps: 1 with policy_loss "
                                                         "dual_clip"),
    (["algo.policy_loss=clip_higher", "algo.clip_eps_high=0.2"], None),  # equal: symmetric
    (["algo.policy_loss=cispo", "algo.clip_eps_high=0.1"], None),
    (["algo.policy_loss=cispo", "algo.clip_eps_high=5", "algo.clip_eps=1.5"], None),
    (["algo.clip_eps_high=0.1"], None),  # the clip loss does not read clip_eps_high
])
def test_clip_ranges_are_checked_for_the_chosen_loss(overrides, message):
    from rlvr.train.config import RunConfig

    if message is None:
        load_config(RunConfig, None, overrides)
        return
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(RunConfig, None, overrides)


def _numeric_fields() -> list[str]:
    """Every int / float field of the run config (sections walked, as docs/config.md lists
    them), e.g. grpo.steps, algo.tis_cap, health.kl_spike.max_kl, reward.weights."""
    from rlvr.configio import _bool_for_number, _model_in
    from rlvr.train.config import RunConfig

    out = []

    def walk(model, prefix):
        for name, field in model.model_fields.items():
            sub = _model_in(field.annotation)
            if sub is not None:
                walk(sub, f"{prefix}{name}.")
            elif _bool_for_number(True, field.annotation) == "" or _bool_for_number(
                    {"x": True}, field.annotation):
                out.append(prefix + name)

    walk(RunConfig, "")
    return out


@pytest.mark.parametrize("key", _numeric_fields())
def test_every_numeric_field_refuses_a_boolean(key):
    from rlvr.train.config import RunConfig

    value = "true" if not key.startswith(("reward.weights", "reward.timeout_overrides_s",
                                          "data.tier_weights")) else "{outcome: true}"
    overrides = [f"{key}={value}"] + (["env.name=tool"] if key.startswith("env.") else [])
    with pytest.raises(ConfigError, match=rf"{re.escape(key)}:.*expected a number, not a "
                                          r"boolean"):
        load_config(RunConfig, None, overrides)


def test_the_numeric_field_sweep_covers_every_section():
    sections = {key.split(".")[0] for key in _numeric_fields()}
    assert {"model", "data", "sft", "grpo", "algo", "rollout", "reward", "env", "eval",
            "checkpoint", "health", "threads", "seed"} <= sections


# The sweep over docs/config.md: out-of-range values and inconsistent
# combinations, each refused naming its field (and, for a combination, the other one).
@pytest.mark.parametrize("overrides, message", [
    # out of range
    (["grpo.top_p=0"], "grpo.top_p: Input should be greater than 0"),
    (["grpo.top_p=1.5"], "grpo.top_p: Input should be less than or equal to 1"),
    (["grpo.temperature=0"], "grpo.temperature: Input should be greater than 0"),
    (["eval.temperature=-0.1"], "eval.temperature: Input should be greater than or equal to 0"),
    (["grpo.steps=-1"], "grpo.steps: Input should be greater than or equal to 0"),
    (["grpo.group_size=1"], "grpo.group_size: Input should be greater than or equal to 2"),
    (["sft.examples=0"], "sft.examples: Input should be greater than or equal to 1"),
    (["grpo.ema_decay=1"], "grpo.ema_decay: Input should be less than 1"),
    (["health.zero_variance.max_fraction=1.5"], "health.zero_variance.max_fraction: Input "
                                                "should be less than or equal to 1"),
    (["health.rollback_lr_factor=0"], "health.rollback_lr_factor: Input should be greater"),
    (["reward.workers=-1"], "reward.workers: Input should be greater than or equal to 0"),
    (["reward.timeout_s=0"], "reward.timeout_s: Input should be greater than 0"),
    (["reward.timeout_overrides_s={code: 0}"], "reward.timeout_overrides_s: code: expected "
                                               "seconds > 0, got 0"),
    (["data.tier_weights={easy: -1}"], "data.tier_weights: easy: expected a finite weight"),
    (["data.sources=[{source: arithmetic, weight: 0}]"], "data.sources.0.weight: Input should "
                                                         "be greater than 0"),
    (["env.name=tool", "env.tool_output_bytes=10"], "env.tool_output_bytes: Input should be "
                                                    "greater than or equal to 256"),
    # wrong type
    (["grpo.steps=many"], "grpo.steps: Input should be a valid integer"),
    (["grpo.top_p=[0.9]"], "grpo.top_p: Input should be a valid number"),
    (["model.name=[a]"], "model.name: Input should be a valid string"),
    (["algo.kl_in=both"], "algo.kl_in: Input should be 'loss' or 'reward'"),
    (["reward.weights=0.1"], "reward.weights: Input should be a valid dictionary"),
    # a task type that does not exist: its setting would apply to nothing
    (["reward.timeout_overrides_s={mathz: 3}"], "reward.timeout_overrides_s.mathz: unknown "
                                                "verifier 'mathz'; did you mean 'math'?"),
    (["reward.format_rule={mathz: boxed}"], "reward.format_rule.mathz: unknown verifier"),
    (["reward.format_options={mathz: {a: 1}}"], "reward.format_options.mathz: unknown verifier"),
    (["reward.verifiers={mathz: math}"], "reward.verifiers.mathz: unknown verifier"),
    # inconsistent combinations
    (["eval.temperature=0"], "eval.temperature: 0 (greedy) with pass_at_k_samples 16"),
    (["grpo.prompts_per_step=2", "grpo.group_size=2", "grpo.update_processes=5"],
     "grpo.update_processes: 5 processes for 4 completions a step"),
    (["algo.kl_coef=0", "algo.kl_controller=adaptive"], "kl_controller: adaptive needs "
                                                        "kl_coef > 0"),
    (["rollout.quantization=int8", "model.precision=bf16"], "rollout.quantization: int8 runs "
                                                            "fp32 activations"),
    # legitimately valid
    (["eval.temperature=0", "eval.pass_at_k_samples=0"], None),
    (["eval.temperature=0", "eval.pass_at_k_samples=1"], None),
    (["eval.every=50", "grpo.steps=5"], None),          # validates at the start and the end
    (["checkpoint.every=50", "grpo.steps=5"], None),    # checkpoints at the end
    (["grpo.micro_batch_size=5"], None),                # 64 rows: micro-batches 5, ..., 4
    (["reward.weights={outcome: 1.0, format: -0.2}"], None),  # a penalty
])
def test_the_config_sweep(overrides, message):
    from rlvr.train.config import RunConfig

    if message is None:
        load_config(RunConfig, None, overrides)
        return
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, None, overrides)
    assert message in str(info.value)
    assert str(info.value).startswith("--set '")
