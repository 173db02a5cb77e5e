"""A :class:`rlvr.train.state.TrainingState` for driving :class:`rlvr.train.grpo.GRPOStep`
in tests: the tasks in draw order, a scripted or real rollout engine, the run's synchronous
rollout source and KL controller (as :func:`rlvr.train.setup.step_runner` makes them)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from rlvr.rollout.types import RolloutOutput, SamplingParams
from rlvr.train.rollouts import rollout_source
from rlvr.train.setup import kl_controller
from rlvr.train.state import ModelState, OptimState, TrainingState
from rlvr.train.taskdata import RunData


class InOrder:
    """A task sampler that draws ``n`` tasks in order, over and over (``next(k)``: the next
    ``k`` indices); ``drawn`` lists the draws."""

    def __init__(self, n: int) -> None:
        self.n, self.drawn = n, []

    def next(self, k: int) -> list[int]:
        start = sum(len(d) for d in self.drawn)
        self.drawn.append([i % self.n for i in range(start, start + k)])
        return self.drawn[-1]


class ScriptedEngine:
    """A rollout engine whose ``generate`` returns ``script(prompts, params)`` and records
    the calls' sampling params."""

    def __init__(self, script: Callable[[list, SamplingParams], RolloutOutput]):
        self.script, self.params = script, []

    def generate(self, prompts, params: SamplingParams) -> RolloutOutput:
        self.params.append(params)
        return self.script(prompts, params)

    def update_weights(self, source=None) -> None:
        pass


def step_state(config, tasks, prompts, engine, tokenizer, rewards, *, policy=None,
               reference=None, optimizer=None, scheduler=None, stop_ids=(99,),
               sampler=None) -> TrainingState:
    """The state a GRPO step reads: ``tasks`` / ``prompts`` drawn in order, repeating (or by
    ``sampler``), ``engine`` sampling them, the run's rollout source scoring with
    ``rewards``, the config's KL controller. ``optimizer`` defaults to a stand-in whose
    learning rate is 0 (for steps whose update the test replaces)."""
    state = TrainingState(
        data=RunData(train_tasks=list(tasks), train_prompts=list(prompts)),
        models=ModelState(policy=policy, reference=reference, engine=engine,
                          rollout_engine=engine, tokenizer=tokenizer),
        optim=OptimState(optimizer=optimizer or SimpleNamespace(param_groups=[{"lr": 0.0}]),
                         scheduler=scheduler, kl=kl_controller(config)),
        stop_ids=tuple(stop_ids))
    state.progress.sampler = sampler or InOrder(len(tasks))
    state.source = rollout_source(state, config, rewards)
    return state
