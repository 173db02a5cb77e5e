"""Degeneration metrics by hand: repeated n-grams, garbled characters, script mixing."""

import pytest

from rlvr.monitor.degeneration import (
    char_script,
    degeneration_metrics,
    dominant_script,
    garbled_share,
    repetition_rate,
    script_mix_share,
)

LOOP = "The answer is 5. " * 20
SOLUTION = "We add 12 and 30 to get 42. We add 42 and 8 to get 50.\n#### 50"
EN_PROMPT = "Solve: 12 + 30 + 8. Give the final answer after ####."
ZH_PROMPT = "小明有3个苹果，又买了4个，一共有几个？"


# --- repetition_rate -----------------------------------------------------------------------

def test_repetition_counts_repeats_of_earlier_ngrams():
    # 12 tokens -> 9 4-grams; distinct: abcd, bcda, cdab, dabc -> 9 - 4 = 5 repeats
    assert repetition_rate("a b c d a b c d a b c d") == pytest.approx(5 / 9)
    # bigrams ab, ba, ab, ba: the last two repeat
    assert repetition_rate("a b a b a", n=2) == pytest.approx(2 / 4)
    assert repetition_rate("a b c d e f") == 0.0                   # 3 distinct 4-grams
    assert repetition_rate("x x x x x", n=1) == pytest.approx(4 / 5)


def test_repetition_needs_n_plus_one_tokens():
    assert repetition_rate("") == 0.0
    assert repetition_rate("a a a a") == 0.0                       # one 4-gram cannot repeat
    assert repetition_rate("a a a a a") == pytest.approx(1 / 2)    # two identical 4-grams
    with pytest.raises(ValueError):
        repetition_rate("a b", n=0)


def test_looping_completion_vs_worked_solution():
    # 80 tokens, 77 4-grams, period 4 -> 4 distinct
    assert repetition_rate(LOOP) == pytest.approx(73 / 77)
    assert repetition_rate(LOOP) > 0.8
    # 18 tokens: all 15 4-grams distinct; with bigrams "We add" and "to get" repeat (2 of 17)
    assert repetition_rate(SOLUTION) == 0.0
    assert repetition_rate(SOLUTION, n=2) == pytest.approx(2 / 17)
    assert repetition_rate(SOLUTION, n=2) < 0.2


def test_repetition_uses_characters_for_unspaced_scripts():
    # 16 Han characters = 16 tokens; n = 4 words -> 8-character n-grams: 9, of which 8 distinct
    assert repetition_rate("一二三四五六七八" * 2) == pytest.approx(1 / 9)
    # spaces and an ASCII tail do not stop character tokenisation: 15 Han + "####" + "5"
    # -> 17 tokens, 10 8-grams; the period-5 loop has 5 distinct among the first 8, then
    # the grams reaching into "#### 5" are new: 10 - 5 - 2 = 3 repeats
    assert repetition_rate("答案是五。" * 3 + " #### 5") == pytest.approx(3 / 10)
    looping = "所以答案是5。" * 20
    assert repetition_rate(looping) > 0.8


# --- garbled_share -------------------------------------------------------------------------

def test_garbled_replacement_characters():
    assert garbled_share("ab\ufffdcd\ufffdefgh") == pytest.approx(0.2)    # 2 of 10
    assert garbled_share("") == 0.0
    assert garbled_share("Plain text,\n\twith\r\nnewlines and tabs.") == 0.0


def test_garbled_control_private_unassigned_surrogate():
    assert garbled_share("a\x00b\x1bc\x7f") == pytest.approx(3 / 6)      # NUL, ESC, DEL
    assert garbled_share("a\x0cb") == pytest.approx(1 / 3)               # form feed is Cc
    assert garbled_share("\ue000abc") == pytest.approx(1 / 4)            # private use
    assert garbled_share("ab\u0378") == pytest.approx(1 / 3)             # unassigned
    assert garbled_share("\udc80ab") == pytest.approx(1 / 3)             # lone surrogate


def test_garbled_isolated_combining_marks_only():
    assert garbled_share("\u0301abc") == pytest.approx(1 / 4)            # mark at the start
    assert garbled_share("a \u0301\u0302") == pytest.approx(2 / 4)       # two marks on a space
    assert garbled_share("cafe\u0301") == 0.0                            # decomposed é
    assert garbled_share("नमस्ते") == 0.0                                 # Devanagari signs
    assert garbled_share("I \u2764\ufe0f it \U0001F468\u200d\U0001F469") == 0.0  # emoji, ZWJ
    assert garbled_share("数学。答案是７") == 0.0


# --- scripts -------------------------------------------------------------------------------

def test_char_script():
    assert char_script("a") == "LATIN" and char_script("Ж") == "CYRILLIC"
    assert char_script("中") == "HAN" and char_script("の") == "HIRAGANA"
    assert char_script("ア") == "KATAKANA" and char_script("한") == "HANGUL"
    assert char_script("Ａ") == "LATIN"                                  # fullwidth
    assert char_script("π") == "GREEK"
    for not_a_script in ("7", " ", "+", "ℝ", "ℓ", "\U0001D465", "µ", "。"):
        assert char_script(not_a_script) is None


def test_dominant_script():
    assert dominant_script("Hello мир") == "LATIN"                      # 5 vs 3
    assert dominant_script("Привет, world") == "CYRILLIC"               # 6 vs 5
    assert dominant_script(ZH_PROMPT) == "HAN"
    assert dominant_script("次の計算をしなさい: 3 + 4") == "JAPANESE"      # kanji + kana
    assert dominant_script("12 + 3 = 15") is None
    assert dominant_script("") is None


def test_script_mix_half_cyrillic():
    assert dominant_script(EN_PROMPT) == "LATIN"
    # 9 Latin + 9 Cyrillic letters
    assert script_mix_share("cat sat mat кот сел мат", "LATIN") == pytest.approx(0.5)
    share = script_mix_share("The sum is 50, поэтому ответ 50.", "LATIN")
    assert share == pytest.approx(12 / 20)                              # 8 Latin, 12 Cyrillic


def test_script_mix_ignores_digits_punctuation_and_math():
    assert script_mix_share("3加4等于7，所以一共有7个。\n#### 7", dominant_script(ZH_PROMPT)) == 0.0
    assert script_mix_share("x = 3, y = 4 #### 7", dominant_script(EN_PROMPT)) == 0.0
    assert script_mix_share("The area is 2πr^2 and Δx = 1, x ∈ ℝ", "LATIN") == 0.0
    # adjacent Greek letters are Greek text: 4 Latin + 4 Greek
    assert script_mix_share("It is καλό", "LATIN") == pytest.approx(0.5)
    assert script_mix_share("7 + 5 = 12", "LATIN") == 0.0               # no letters
    assert script_mix_share("anything", None) == 0.0
    # a Japanese prompt accepts kanji and kana; a Chinese one does not accept kana
    assert script_mix_share("答えは7です", "JAPANESE") == 0.0
    assert script_mix_share("答えは7です", "HAN") == pytest.approx(4 / 5)   # 1 kanji, 4 kana


# --- degeneration_metrics ------------------------------------------------------------------

def test_degeneration_metrics_batch_means():
    completions = [LOOP, "cat sat mat кот сел мат", "3加4等于7", "ab\ufffdcd\ufffdefgh"]
    prompts = [EN_PROMPT, EN_PROMPT, ZH_PROMPT, ZH_PROMPT]
    m = degeneration_metrics(completions, prompts)
    assert m["repetition_rate"] == pytest.approx((73 / 77) / 4)
    assert m["repetitive_fraction"] == pytest.approx(1 / 4)
    assert m["garbled_rate"] == pytest.approx(0.2 / 4)
    # 0.5 (Cyrillic half) + 1.0 (Latin letters against a Chinese prompt)
    assert m["script_mix_rate"] == pytest.approx(1.5 / 4)


def test_degeneration_metrics_edge_cases():
    assert degeneration_metrics([], []) == {"repetition_rate": 0.0, "garbled_rate": 0.0,
                                            "script_mix_rate": 0.0, "repetitive_fraction": 0.0}
    with pytest.raises(ValueError):
        degeneration_metrics(["a"], [])


def test_degeneration_metrics_computes_each_prompt_script_once(monkeypatch):
    # What keeps a step's metrics cheap (the per-step cost is not asserted here): a group's G
    # completions share their prompt, whose script is computed once, not once per completion.
    from rlvr.monitor import degeneration

    words = "we add the two numbers then multiply so the total is 42 apples".split()
    completions = [" ".join(words[(i * 7 + j) % len(words)] for j in range(100))
                   for i in range(128)]
    prompts = [EN_PROMPT if i < 64 else ZH_PROMPT for i in range(128)]  # 2 groups of 64
    expected = {
        "repetition_rate": sum(map(repetition_rate, completions)) / 128,
        "garbled_rate": sum(map(garbled_share, completions)) / 128,
        "script_mix_rate": sum(script_mix_share(c, dominant_script(p))
                               for c, p in zip(completions, prompts)) / 128,
        "repetitive_fraction": sum(repetition_rate(c) > degeneration.REPETITIVE_THRESHOLD
                                   for c in completions) / 128,
    }
    seen = []

    def counting(text):
        seen.append(text)
        return dominant_script(text)

    monkeypatch.setattr(degeneration, "dominant_script", counting)
    assert degeneration_metrics(completions, prompts) == pytest.approx(expected)
    assert seen == [EN_PROMPT, ZH_PROMPT]
