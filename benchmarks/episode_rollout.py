"""Multi-turn episode rollouts: the torch engine's one decode loop (the KV cache continues
across turns, each task's prompt prefilled once for its G episodes) against turn-synchronous
rounds through ``generate`` (every turn re-prefills each episode's prompt and ids so far), side
by side in one process, on the tool preset's prompts (the ``tool`` environment's system message,
tool_arithmetic questions).

The environment answers every turn that ends with the end-of-turn token with a short user
message ("Check it once more.") until ``--max-turns``, so episodes run several turns whatever
the model (the default model does not call tools before its SFT). Two workloads: training-like
(``--prompts`` tasks x ``--group`` sampled episodes, T = 1) and validation-like (greedy, one
episode per task: both paths play the same episodes up to rounding). The headline is the
training-like sampled-tokens-per-second ratio.

    python benchmarks/episode_rollout.py [--quick] [--model PATH] [--precision fp32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _machine import machine_line


def _env_class():
    from rlvr.envs import register_env
    from rlvr.envs.tool_env import ToolEnv

    @register_env
    class AgainEnv(ToolEnv):
        """The tool environment's prompt, but every stopped turn gets a user reply."""

        name = "bench_again"

        def parse_action(self, episode, text):
            return text

        def respond(self, episodes, actions):
            return [{"role": "user", "content": "Check it once more."} for _ in episodes]

    return AgainEnv


class RoundsOnly:
    """The engine seen through ``generate`` only: episodes play in rounds."""

    def __init__(self, engine):
        self.engine, self.pad_token_id = engine, engine.pad_token_id

    def generate(self, prompts, params):
        return self.engine.generate(prompts, params)


def _play(engine, env, tokenizer, tasks, messages, params):
    from rlvr.envs.episodes import rollout_episodes

    start = time.perf_counter()
    result = rollout_episodes(engine, env, tokenizer, tasks, None, params, messages)
    seconds = time.perf_counter() - start
    sampled = int(result.output.loss_mask.sum())
    turns = sum(e.turns for e in result.episodes) / len(result.episodes)
    return sampled, seconds, turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 tasks x 8, 8 greedy tasks")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--greedy-tasks", type=int, default=64)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.prompts, args.greedy_tasks = 4, 8

    from rlvr.envs import EnvConfig
    from rlvr.models import load_model_and_tokenizer
    from rlvr.rewards import RewardPipeline
    from rlvr.rewards.config import RewardConfig
    from rlvr.rollout import SamplingParams, create_engine
    from rlvr.tasks.prompting import chat_messages
    from rlvr.tasks.tool_arithmetic import generate

    print(machine_line(args.precision))
    model, tokenizer = load_model_and_tokenizer(args.model)
    engine = create_engine("torch", model.eval(), precision=args.precision)
    # the weight snapshot and the kernels' first build are not what is measured
    engine.generate([tokenizer("warm up").input_ids], SamplingParams(max_new_tokens=2))
    instruction = "Show the calculation, then the answer as '#### <answer>'."
    tasks = generate("3dx3d:1,words1:1", max(args.prompts, args.greedy_tasks),
                                     seed=args.seed)
    stop = tuple(i for i in (tokenizer.convert_tokens_to_ids("<|im_end|>"),
                             tokenizer.eos_token_id) if i is not None)
    env_class = _env_class()
    config = EnvConfig(name="bench_again", tools=["calculator"], max_turns=args.max_turns)
    rows = []
    with RewardPipeline(RewardConfig(workers=0)) as pipeline:
        for label, count, n, temperature in (("sampled", args.prompts, args.group, 1.0),
                                             ("greedy", args.greedy_tasks, 1, 0.0)):
            batch = tasks[:count]
            messages = [chat_messages(t, instruction, False) for t in batch]
            params = SamplingParams(temperature=temperature, max_new_tokens=args.max_new_tokens,
                                    stop_token_ids=stop, n=n, seed=args.seed)
            result = {}
            for path, eng in (("loop", engine), ("rounds", RoundsOnly(engine))):
                env = env_class(config, pipeline)
                result[path] = _play(eng, env, tokenizer, batch, messages, params)
            rows.append((label, count, n, result))
    for label, count, n, result in rows:
        parts = []
        for path, (sampled, seconds, turns) in result.items():
            parts.append(f"{path} {sampled / seconds:.0f} tokens/s ({sampled} sampled tokens, "
                         f"{turns:.2f} turns/episode, {seconds:.1f} s)")
        print(f"{label} {count} tasks x {n}: " + "; ".join(parts))
    label, _, _, result = rows[0]
    loop = result["loop"][0] / result["loop"][1]
    rounds = result["rounds"][0] / result["rounds"][1]
    greedy = rows[1][3]
    ratio_greedy = (greedy["loop"][0] / greedy["loop"][1]) / (greedy["rounds"][0]
                                                              / greedy["rounds"][1])
    print(f"episode rollout tokens/s ({label}): loop {loop:.0f}, rounds {rounds:.0f}, ratio "
          f"{loop / rounds:.1f}x (greedy {ratio_greedy:.1f}x)")


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
