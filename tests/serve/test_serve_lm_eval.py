"""lm-evaluation-harness, unmodified, against `rlvr serve` with its default
``local-completions`` settings (token-id prompts; the tokenizer found through
``/tokenizer_info`` and ``/tokenize``): a ``generate_until`` task and a ``multiple_choice``
(loglikelihood) task from task files and JSONL written here (nothing downloaded). The
loglikelihoods lm-eval reads back equal the ones computed in-process with rlvr's
:func:`rlvr.algo.logprobs.token_log_probs` over the same model."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr.algo.logprobs import token_log_probs

lm_eval = pytest.importorskip("lm_eval")

GENERATE = [{"question": "ab", "answer": "x"}, {"question": "hello", "answer": "y"}]
CHOICES = [{"question": "Say:", "choices": [" yes", " no", " maybe"], "label": 0},
           {"question": "Count to", "choices": [" one", " two"], "label": 1}]

GENERATE_TASK = """task: rlvr_tiny_generate
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 4
  do_sample: false
metric_list:
  - metric: exact_match
"""

CHOICE_TASK = """task: rlvr_tiny_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
"""


def write_task(folder, name: str, template: str, rows: list[dict]) -> None:
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / f"{name}.yaml").write_text(template.format(data=data))


@torch.no_grad()
def in_process_loglikelihood(model, tokenizer, context: str, continuation: str) -> float:
    """log p(continuation | context) under the fp32 model, rlvr's token_log_probs."""
    whole = tokenizer(context + continuation, add_special_tokens=False).input_ids
    n_context = len(tokenizer(context, add_special_tokens=False).input_ids)
    logits = model(torch.tensor([whole])).logits[:, :-1]
    values = token_log_probs(logits.float(), torch.tensor([whole[1:]]))[0]
    return float(values[n_context - 1:].sum())


def arguments(logged) -> tuple[str, str]:
    """A logged loglikelihood request's ``(context, continuation)``."""
    if isinstance(logged, dict):
        logged = list(logged.values())
    return logged[0], logged[1]


@pytest.mark.slow  # about 20-60 s: lm-eval loads its task registry
def test_lm_eval_local_completions_runs_both_task_kinds_end_to_end(served, tiny, tmp_path):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    url, _ = served
    write_task(tmp_path, "generate", GENERATE_TASK, GENERATE)
    write_task(tmp_path, "choice", CHOICE_TASK, CHOICES)
    results = simple_evaluate(
        model="local-completions",
        model_args=f"base_url={url}/v1/completions,model=tiny-random,max_retries=1",
        tasks=["rlvr_tiny_generate", "rlvr_tiny_choice"],
        task_manager=TaskManager(include_path=str(tmp_path)), log_samples=True)
    samples = results["samples"]

    generated = [s["resps"][0][0] for s in samples["rlvr_tiny_generate"]]
    model, tokenizer = tiny
    for doc, text in zip((s["doc"] for s in samples["rlvr_tiny_generate"]), generated):
        ids = tokenizer(doc["question"], add_special_tokens=False).input_ids
        with torch.no_grad():  # greedy, 4 tokens, cut at a newline or the end of turn
            out = model.generate(torch.tensor([ids]), max_new_tokens=4, do_sample=False,
                                 eos_token_id=tokenizer.eos_token_id,
                                 pad_token_id=tokenizer.pad_token_id)
        expected = tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)
        assert text == expected.split("\n")[0]
    assert "exact_match,none" in results["results"]["rlvr_tiny_generate"]

    choice_samples = samples["rlvr_tiny_choice"]
    assert len(choice_samples) == 2
    for sample in choice_samples:
        doc = sample["doc"]
        got = [resp[0][0] for resp in sample["resps"]]
        pairs = [arguments(a) for a in sample["arguments"]]  # lm-eval's (context, choice)
        assert [c for _, c in pairs] == [" " + choice for choice in doc["choices"]]
        expected = [in_process_loglikelihood(model, tokenizer, context, continuation)
                    for context, continuation in pairs]
        assert got == pytest.approx(expected, abs=1e-4)
    accuracy = results["results"]["rlvr_tiny_choice"]["acc,none"]
    right = [max(range(len(s["resps"])), key=lambda i: s["resps"][i][0][0]) ==
             s["doc"]["label"] for s in choice_samples]
    assert accuracy == pytest.approx(sum(right) / len(right))
