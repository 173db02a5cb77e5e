"""Format rules (R2), one hand-made case per behaviour."""

import pytest

from rlvr.rewards.registry import FORMAT_RULES


@pytest.mark.parametrize(
    "rule, completion, expected",
    [
        ("think_answer", "<think>2+2 is 4</think><answer>4</answer>", 1.0),
        ("think_answer", "<think>2+2 is 4</think>\n<answer> 4 </answer>\n", 1.0),
        ("think_answer", "<think></think><answer>4</answer>", 0.0),  # empty reasoning
        ("think_answer", "<answer>4</answer>", 0.0),
        ("think_answer", "text <think>a</think><answer>4</answer>", 0.0),  # text outside tags
        ("think_answer", "<think>a</think><answer>4</answer><answer>5</answer>", 0.0),
        ("hash_line", "3 + 4 = 7\n#### 7", 1.0),
        ("hash_line", "3 + 4 = 7\n#### 7\n", 1.0),
        ("hash_line", "#### 7", 0.0),  # no reasoning
        ("hash_line", "3 + 4 = 7\n#### 7\nmore text", 0.0),  # not the final line
        ("hash_line", "#### 6\n3 + 4 = 7\n#### 7", 0.0),  # two answer lines
        ("boxed", "so \\boxed{7}", 1.0),
        ("boxed", "\\boxed{7} or \\boxed{8}", 0.0),
        ("boxed", "seven", 0.0),
        ("answer_tag", "<answer>7</answer>", 1.0),
        ("answer_tag", "<answer> </answer>", 0.0),
        ("marked_answer", "work\n#### 7", 1.0),
        ("marked_answer", "work \\boxed{7}", 1.0),
        ("marked_answer", "the answer is 7", 0.0),
        ("json", '{"answer": 7}', 1.0),
        ("json", 'Here:\n```json\n{"answer": 7}\n```', 1.0),
        ("json", "[1, 2]", 0.0),
        ("json", "{bad json}", 0.0),
    ],
)
def test_format_rule(rule, completion, expected):
    assert FORMAT_RULES.get(rule)(completion) == expected


def test_json_required_keys():
    rule = FORMAT_RULES.get("json")
    assert rule('{"answer": 1, "reason": "x"}', required_keys=("answer", "reason")) == 1.0
    assert rule('{"answer": 1}', required_keys=("answer", "reason")) == 0.0


def test_regex_rule_and_empty_pattern_error():
    rule = FORMAT_RULES.get("regex")
    assert rule("ANSWER: 12", pattern=r"ANSWER: \d+") == 1.0
    assert rule("answer 12", pattern=r"ANSWER: \d+") == 0.0
    with pytest.raises(ValueError, match="non-empty 'pattern'"):
        rule("x")


def test_format_rules_read_only_the_tail_of_huge_input():
    # What keeps the regexes cheap on adversarial output: a long completion is judged on its
    # last 20,000 characters only (think_answer, which needs the whole text, scores 0 past
    # 200,000). A well-formed text that long is judged by its tail, not by its head.
    text = "<think>" + "a" * 1_000_000 + "\n#### 5" + "{" * 100_000
    for name in ("think_answer", "hash_line", "boxed", "answer_tag", "marked_answer", "json"):
        assert FORMAT_RULES.get(name)(text) == 0.0, name
    pad = "a" * 1_000_000
    # a second box / tag / "####" line in the head is never seen: the tail holds exactly one
    assert FORMAT_RULES.get("boxed")("\\boxed{1} " + pad + " \\boxed{2}") == 1.0
    assert FORMAT_RULES.get("answer_tag")("<answer>1</answer>" + pad + "<answer>2</answer>") == 1.0
    assert FORMAT_RULES.get("hash_line")("#### 1\n" + pad + "\n#### 2") == 1.0
    assert FORMAT_RULES.get("boxed")("\\boxed{1} \\boxed{2}" + pad) == 0.0  # both out of sight
    assert FORMAT_RULES.get("think_answer")(f"<think>{pad}</think><answer>5</answer>") == 0.0
    assert FORMAT_RULES.get("think_answer")(f"<think>{pad[:1000]}</think><answer>5</answer>") == 1.0


def test_format_is_judged_on_the_completions_own_turn():
    # the answer check ignores text after an end-of-turn token or a "User:" line; so does
    # the format check (a hallucinated next turn's "#### 4" made the format 0 before)
    from rlvr.rewards.format import hash_line

    assert hash_line("3 + 9 = 12\n#### 12\nUser: what is 2+2?\n#### 4") == 1.0
    assert hash_line("3 + 9 = 12\n#### 12<|im_end|>\n<|im_start|>user\n#### 10") == 1.0
    assert hash_line("3 + 9 = 12\n#### 12\n#### 4") == 0.0
