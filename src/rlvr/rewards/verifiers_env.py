"""``verifiers`` environments (PyPI ``verifiers``, the library prime-rl trains on) behind
rlvr's reward pipeline, task type ``"verifiers"``.

An environment module exposes ``load_environment(**kwargs)`` returning an environment with a
dataset of ``prompt`` / ``answer`` / ``info`` rows, a ``Parser`` (``parse_answer``) and a
``Rubric`` of weighted reward functions (sync or async). rlvr uses:

- the dataset rows as tasks (:mod:`rlvr.tasks.verifiers_source`, ``data.source:
  verifiers``); a task's reference holds the environment and the row::

      {"env": "my_env", "kwargs": {"n": 100}, "row": {"prompt": [...], "answer": "42", ...}}

- the rubric as the verifier (:func:`verify_rubric`, registered for task type
  ``"verifiers"`` with no format rule of rlvr's own: the rubric has its own): the completion
  becomes the assistant message, the environment's own ``rubric.score_rollout`` scores it,
  so the reward is the rubric's weighted sum exactly as the environment computes it; each
  function's score is logged as the reward component ``rubric/<function>``, and the parser's
  ``parse_answer`` gives the extracted answer.

Only single-turn environments (``SingleTurnEnv``) run this way as a data source; multi-turn
environments (``MultiTurnEnv``) play episodes through the ``env: {source: verifiers}`` section
(:mod:`rlvr.envs.verifiers_adapter`; tool environments, ``ToolEnv``, too), whose finished
episode carries its whole conversation in the reference (``"episode"``) for the rubric. Group
reward functions are refused with a message (:func:`load`).
``verifiers`` is optional (``pip install 'rlvr[verifiers]'``; 0.2 and 0.3, whose classic API
this uses), imported on first use; a verifier worker loads each environment once.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import importlib.util
import json
import math
import threading
from functools import lru_cache
from types import ModuleType
from typing import Any

from rlvr.registry import add_working_directory
from rlvr.rewards.types import Status, Verdict

TASK_TYPE = "verifiers"
INSTALL_HINT = "verifiers is not installed: pip install 'rlvr[verifiers]' (or 'verifiers<0.4')"
COMPONENT_PREFIX = "rubric/"
#: The component that says whether the rubric's reward reached the environment's own
#: ``pass_threshold`` (1.0 / 0.0): verifiers' pass mark, reported beside rlvr's status (which
#: counts only a full score as correct); it weighs nothing.
THRESHOLD_COMPONENT = "rubric_pass"
#: Tolerance of the full-score comparison (the rubric's weighted sum in floating point).
FULL_SCORE_TOLERANCE = 1e-9


class VerifiersEnvError(ValueError):
    """An environment that cannot run here (not single-turn, group rewards, odd prompts)."""


def import_verifiers():
    """The ``verifiers`` package (its classic API: ``SingleTurnEnv``, ``Rubric``, ...).

    Raises:
        ImportError: not installed, or a version without the classic API (0.4 moved it).
    """
    try:
        import verifiers as vf
        vf.SingleTurnEnv  # noqa: B018  (0.3 resolves the classic API lazily)
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    except AttributeError as exc:
        raise ImportError(f"this verifiers version has no SingleTurnEnv: {INSTALL_HINT}") \
            from exc
    return vf


def check_episodic(env: Any, module: str) -> None:
    """Refuse what rlvr cannot play as episodes (:mod:`rlvr.envs.verifiers_adapter`).

    Raises:
        VerifiersEnvError: an environment that is not a ``MultiTurnEnv`` (its own
            ``rollout`` drives a model client), or group reward functions.
    """
    vf = import_verifiers()
    kind = type(env).__name__
    if not isinstance(env, vf.MultiTurnEnv):
        raise VerifiersEnvError(
            f"verifiers environment {module!r} is a {kind}, not a MultiTurnEnv: its own "
            f"rollout() drives a model client; rlvr plays only env_response / stop-condition "
            f"environments (SingleTurnEnv, MultiTurnEnv)")
    _check_group(env, module)


def _check_group(env: Any, module: str) -> None:
    if env.rubric.has_group_rewards:
        raise VerifiersEnvError(
            f"verifiers environment {module!r}: its rubric has group reward functions (they "
            f"score a whole group of completions at once); rlvr scores each completion alone")


def check_single_turn(env: Any, module: str) -> None:
    """Refuse what rlvr cannot run as one prompt -> one scored completion.

    Raises:
        VerifiersEnvError: a multi-turn or tool environment (the message points multi-turn
            ones to ``env: {source: verifiers}``), or a rubric with group reward functions.
    """
    vf = import_verifiers()
    kind = type(env).__name__
    if not isinstance(env, vf.SingleTurnEnv):
        raise VerifiersEnvError(
            f"verifiers environment {module!r} is a {kind} (multi-turn): rlvr runs single-turn "
            f"verifiers environments only (SingleTurnEnv: one prompt, one completion, scored "
            f"by the rubric) as a data source; multi-turn environments, whose turns go back "
            f"and forth with the environment, play episodes through the run config's "
            f"`env: {{source: verifiers, module: {module}}}` section instead of data.source")
    _check_group(env, module)


@lru_cache(maxsize=16)
def _load(module: str, kwargs_json: str):
    vf = import_verifiers()
    import_environment_module(module)
    return vf.load_environment(module, **json.loads(kwargs_json))


def import_environment_module(module: str) -> ModuleType:
    """Import the environment module ``module`` as verifiers names it (``-`` read as ``_``,
    the part after the last ``/``), looking in the working directory too, as reward plugins
    are (:func:`rlvr.registry.add_working_directory`): an environment module next to
    the config imports without being installed.

    Raises:
        VerifiersEnvError: no such module in the working directory or on the Python path, or
            the module raised ImportError while importing (its message is given).
    """
    name = module.replace("-", "_").split("/")[-1]
    cwd = add_working_directory()
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise VerifiersEnvError(
            f"verifiers environment module {name!r} not found: no {name}.py (or package "
            f"{name}/) in the working directory {cwd} and no installed module of that name; "
            f"run rlvr from the directory that holds it (where reward plugins are found too), "
            f"or install the package that provides it")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise VerifiersEnvError(f"verifiers environment module {name!r} ({spec.origin}) "
                                f"failed to import: {type(exc).__name__}: {exc}") from exc


def load(module: str, kwargs: dict | None = None, *, episodic: bool = False):
    """The environment ``module.load_environment(**kwargs)`` (cached per process), checked by
    :func:`check_single_turn` (``episodic``: by :func:`check_episodic`, which also admits
    multi-turn environments).

    Raises:
        ImportError: verifiers is not installed. VerifiersEnvError: the module is not found
            or does not import (:func:`import_environment_module`), or the environment is not
            runnable this way. ValueError / RuntimeError: verifiers could not load it.
    """
    env = _load(module, json.dumps(kwargs or {}, sort_keys=True))
    (check_episodic if episodic else check_single_turn)(env, module)
    return env


def prompt_text(prompt: Any, module: str) -> str:
    """A row's prompt as rlvr's one user turn: a string as is; messages: the system message
    (the environment's answer format) and the user message joined by a blank line.

    Raises:
        VerifiersEnvError: other roles (few-shot turns) or no user message.
    """
    if isinstance(prompt, str):
        return prompt
    parts, users = [], 0
    for message in prompt or []:
        role, content = message.get("role"), message.get("content")
        if role not in ("system", "user") or not isinstance(content, str):
            raise VerifiersEnvError(
                f"verifiers environment {module!r}: a prompt message with role {role!r} "
                f"(or non-text content); rlvr prompts are one system + one user message")
        users += role == "user"
        parts.append(content)
    if users != 1:
        raise VerifiersEnvError(f"verifiers environment {module!r}: a prompt with {users} "
                                f"user messages; rlvr prompts have exactly one")
    return "\n\n".join(parts)


def row_state(vf, row: dict):
    """The part of a verifiers ``State`` that ``Environment.init_state`` builds from dataset
    ``row`` (a copy of it: ``input``, ``task``, ``prompt``); ``vf`` is the ``verifiers``
    module. Shared by scoring (:func:`_state`) and the episode adapter
    (:mod:`rlvr.envs.verifiers_adapter`)."""
    from verifiers.types import flatten_task_input
    from verifiers.utils.message_utils import normalize_messages

    row = copy.deepcopy(row)
    if isinstance(row.get("info"), str):
        row["info"] = json.loads(row["info"])
    task = flatten_task_input(row)
    state = vf.State(input=task)
    state["task"] = task
    state["prompt"] = normalize_messages(task.get("prompt", ""), field_name="input.prompt")
    return state


def _state(vf, row: dict, completion: str, episode: dict | None = None):
    # row_state plus the rollout: the completion as the assistant message of a single-turn
    # rollout, or an episode's whole conversation (one trajectory step per assistant turn, so
    # the monitor rubric counts the turns) and the JSON state its env_response calls left
    # (:mod:`rlvr.envs.verifiers_adapter`).
    from verifiers.utils.message_utils import normalize_messages

    state = row_state(vf, row)
    raw = [{"role": "assistant", "content": completion}] if episode is None \
        else episode["completion"]
    messages = normalize_messages(copy.deepcopy(raw), field_name="completion")
    state["completion"] = messages
    state["trajectory"] = [{"prompt": state["prompt"] + messages[:i], "completion": [m]}
                           for i, m in enumerate(messages) if m.role == "assistant"]
    for key, value in ((episode or {}).get("state") or {}).items():
        state.setdefault(key, copy.deepcopy(value))
    state.update(is_completed=True, is_truncated=False, reward=None, metrics=None, error=None)
    return state, messages


def run_sync(coro):
    """The result of coroutine ``coro`` (verifiers' rubric and environment calls are async),
    run to completion here; a caller already inside an event loop runs it in a thread of its
    own. Raises what the coroutine raises."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def score_rubric(env: Any, row: dict, completion: str, episode: dict | None = None
                 ) -> tuple[float, dict[str, float], str | None]:
    """``(reward, per-function scores, parsed answer)`` of ``completion`` to ``row`` by the
    environment's own ``rubric.score_rollout`` (reward = sum of weight * function score) and
    ``parser.parse_answer``. ``episode`` (``{"completion": [messages after the prompt],
    "state": {...}}``): a multi-turn rollout, scored over its whole conversation (the parser
    reads its last assistant message)."""
    vf = import_verifiers()
    state, messages = _state(vf, row, completion, episode)
    run_sync(env.rubric.score_rollout(state))
    metrics = {str(k): float(v) for k, v in (state["metrics"] or {}).items()}
    parsed = env.parser.parse_answer(messages)
    return float(state["reward"]), metrics, None if parsed is None else str(parsed)


def verify_rubric(completion: str, reference: dict, *, scale: float = 1.0,
                  **options: Any) -> Verdict:
    """Score a completion with its verifiers environment's rubric (module docs).

    Status: ``unparsed`` when the parser finds no answer (the rubric's reward still counts:
    it is what the environment gives, e.g. a format function's share), else ``correct`` iff
    the reward is the rubric's full score (:func:`full_score`: every reward function gave
    1.0), else ``wrong``. So pass@1 counts only full-score answers: a partial credit (an
    environment that gives 0.5 for an answer that only contains the right one) is no pass.
    Whether the reward reached the environment's own ``pass_threshold`` (verifiers' pass mark,
    0.5 by default) is reported separately, as the component ``rubric_pass``
    (:data:`THRESHOLD_COMPONENT`).

    Args:
        completion: the model's whole output (the assistant message).
        reference: ``{"env": module, "kwargs": {...}, "row": {...}}``, plus ``"episode"``
            for a multi-turn episode (:func:`score_rubric`; ``completion`` is then its last
            assistant turn).
        scale: the outcome is ``scale * reward``; rlvr's outcome lies in [0, 1], so a rubric
            whose weights sum past 1 needs e.g. ``scale: 0.5``
            (``reward.verifier_options: {verifiers: {scale: 0.5}}``).
        options: accepted for the pipeline's interface; none are used.

    Returns:
        A :class:`Verdict` with ``score`` = the scaled reward and ``components`` = each
        reward function's score as ``rubric/<function>``, and ``rubric_pass``.

    Raises:
        ValueError: a malformed reference, or a scaled reward outside [0, 1] (the message
            gives the reward and the rubric's weights). The pipeline reports it as
            ``error``.
    """
    if not isinstance(reference, dict) or not isinstance(reference.get("env"), str) \
            or not isinstance(reference.get("row"), dict):
        raise ValueError("verifiers reference needs 'env' (module name), 'kwargs' and 'row'")
    module = reference["env"]
    episode = reference.get("episode")
    env = load(module, reference.get("kwargs") or {}, episodic=episode is not None)
    reward, metrics, parsed = score_rubric(env, reference["row"], completion, episode)
    outcome = scale * reward
    if not (math.isfinite(outcome) and 0.0 <= outcome <= 1.0):
        raise ValueError(f"{module}: rubric reward {reward:g} * scale {scale:g} is outside "
                         f"[0, 1] (weights {env.rubric._get_reward_weights()}); set "
                         f"reward.verifier_options.verifiers.scale")
    full = full_score(env)
    if parsed is None or not parsed.strip():
        status = Status.unparsed
    else:
        status = Status.correct if reward >= full - FULL_SCORE_TOLERANCE else Status.wrong
    passed = reward >= env.pass_threshold
    shown = None if parsed is None else parsed[:200]
    return Verdict(status, extracted=shown, method="parser",
                   detail=f"{module}: rubric reward {reward:g} of {full:g} (the environment's "
                   f"pass_threshold {env.pass_threshold:g}: {'met' if passed else 'not met'})",
                   score=outcome,
                   components={**{COMPONENT_PREFIX + k: v for k, v in metrics.items()},
                               THRESHOLD_COMPONENT: 1.0 if passed else 0.0})


def full_score(env: Any) -> float:
    """The rubric's full score: its reward when every reward function gives 1.0, i.e. the sum
    of its positive weights (weight-0 functions are metrics only)."""
    return float(sum(w for w in env.rubric._get_reward_weights() if w > 0))
