"""bound_text: the cut, the marker, and the byte budget (marker included), hand-worked."""

import pytest

from rlvr.tools import bound_text


def test_text_that_fits_is_unchanged():
    assert bound_text("x" * 64, 64) == ("x" * 64, 0)


def test_head_keeps_the_start_and_names_the_cut():
    # marker sized for the largest count: "\n[... 100 bytes cut]" = 20 bytes -> 44 kept, 56 cut
    text, cut = bound_text("x" * 100, 64)
    assert (text, cut) == ("x" * 44 + "\n[... 56 bytes cut]", 56)
    assert len(text.encode()) == 63


def test_tail_keeps_the_end():
    text, cut = bound_text("a" * 50 + "b" * 50, 64, keep="tail")
    assert (text, cut) == ("[... 56 bytes cut]\n" + "b" * 44, 56)


def test_a_character_split_at_the_cut_is_dropped():
    # "a" + 50 x "é" (2 bytes each) = 101 bytes; the marker bound is 20, so 44 bytes of room:
    # "a" and 21 x "é" (43 bytes) fit, half an "é" does not -> 58 bytes cut
    text, cut = bound_text("a" + "é" * 50, 64)
    assert (text, cut) == ("a" + "é" * 21 + "\n[... 58 bytes cut]", 58)


def test_a_megabyte_is_bounded():
    text, cut = bound_text("y" * 1_000_000, 1024)
    # marker bound "\n[... 1000000 bytes cut]" = 24 bytes -> 1000 kept
    assert text == "y" * 1000 + "\n[... 999000 bytes cut]" and cut == 999_000


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_bytes must be >= 64"):
        bound_text("x", 10)
    with pytest.raises(ValueError, match="keep must be"):
        bound_text("x", 100, keep="middle")
