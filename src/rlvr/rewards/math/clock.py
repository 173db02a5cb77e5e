"""Times of day as answers: ``9:05``, ``3:45 PM``, ``15:45``, ``下午3:45``, ``noon``,
``a quarter to four``, ``half past 3``, ``seven o'clock``.

>>> parse_clock("a quarter to four")
Clock(hour=3, minute=45, second=0, meridiem='')
>>> sorted(parse_clock("3:45").seconds_of_day()) == [3 * 3600 + 45 * 60, 15 * 3600 + 45 * 60]
True

A ratio such as ``3:4`` is not a time (minutes have two digits).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .numwords import english_number


@dataclass(frozen=True)
class Clock:
    """A time of day ``hour:minute[:second]``; ``meridiem`` is ``"am"``, ``"pm"`` or ``""``
    (not said)."""

    hour: int
    minute: int
    second: int = 0
    meridiem: str = ""

    def seconds_of_day(self) -> set[int]:
        """The times of day (seconds after midnight) this reading can mean: one with am/pm or
        a 24-hour hour (0 or above 12), else both the morning and the afternoon reading."""
        base = (self.hour % 12) * 3600 + self.minute * 60 + self.second
        if self.meridiem == "am":
            return {base}
        if self.meridiem == "pm":
            return {base + 12 * 3600}
        if self.hour > 12 or self.hour == 0:
            return {(self.hour % 24) * 3600 + self.minute * 60 + self.second}
        return {base, base + 12 * 3600}


_MERIDIEM = r"(a\.?\s?m\.?|p\.?\s?m\.?|in the (?:morning|afternoon|evening)|at night)"
_DIGITS_RE = re.compile(r"(?i)(上午|早上|凌晨|下午|晚上)?\s*"
                        r"([01]?\d|2[0-4]):([0-5]\d)(?::([0-5]\d))?"
                        r"\s*" + _MERIDIEM + "?")
_UNIT_WORD = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_NUMBER_WORD = (r"(?:" + _UNIT_WORD[3:-1] + r"|thirteen|fourteen|fifteen|sixteen|seventeen|"
                r"eighteen|nineteen|twenty|thirty|forty|fifty)(?:-" + _UNIT_WORD + ")?")
_HOUR = r"(\d{1,2}|" + _UNIT_WORD + ")"
_WORDS_RE = re.compile(r"(?i)(?:(a\s+)?quarter|half|(\d{1,2}|" + _NUMBER_WORD + r")\s+minutes?)\s+"
                       r"(past|after|to|before)\s+" + _HOUR + r"(?:\s+o'?clock)?\s*"
                       + _MERIDIEM + "?"
                       r"|" + _HOUR + r"\s+o'?clock\s*" + _MERIDIEM + "?")
_NAMED = {"noon": (12, "pm"), "midday": (12, "pm"), "midnight": (12, "am"),
          "中午": (12, "pm"), "正午": (12, "pm"), "午夜": (12, "am"), "半夜": (12, "am")}
# A time inside a sentence, for the answer extractor.
FIND_RE = re.compile(r"(?i)(?<![\d:])(?:上午|下午|晚上|早上)?"
                     r"\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?\s?m\b\.?)?(?![\d:])"
                     r"|\b(?:noon|midday|midnight)\b|中午|正午|午夜|半夜|"
                     + _WORDS_RE.pattern.replace("(?i)", ""))


def _meridiem(word: str | None, zh: str | None = None) -> str:
    if zh:
        return "pm" if zh in ("下午", "晚上") else "am"
    if not word:
        return ""
    w = word.lower()
    return "am" if w.startswith("a") or "morning" in w else "pm"


def _hour(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    parsed = english_number(word)
    return int(parsed[0]) if parsed and parsed[0].denominator == 1 else None


def parse_clock(text: str) -> Clock | None:
    """The time of day ``text`` is exactly (digits, named times, words), or ``None``."""
    t = re.sub(r"\\text\{\s*([^{}]*)\}", r" \1", text).strip().rstrip(".").strip()
    named = _NAMED.get(t.lower().removeprefix("at ").strip())
    if named:
        return Clock(named[0], 0, 0, named[1])
    m = _DIGITS_RE.fullmatch(t)
    if m:
        zh, hour, minute, second, mer = m.groups()
        meridiem = _meridiem(mer, zh)
        if meridiem and not 1 <= int(hour) <= 12:
            return None
        return Clock(int(hour), int(minute), int(second or 0), meridiem)
    m = _WORDS_RE.fullmatch(t)
    return _from_words(m) if m else None


def _from_words(m: re.Match) -> Clock | None:
    quarter_a, count, direction, hour_w, mer1, oclock_hour, mer2 = m.groups()
    if oclock_hour is not None:
        hour = _hour(oclock_hour)
        return None if hour is None or not 0 <= hour <= 24 else Clock(hour, 0, 0, _meridiem(mer2))
    text = m.group(0).lower()
    if "quarter" in text.split(direction.lower())[0]:
        minutes = 15
    else:
        minutes = 30 if text.startswith("half") else None
    if minutes is None:
        minutes = _hour(count)
    hour = _hour(hour_w)
    if minutes is None or hour is None or not 0 < minutes < 60 or not 0 <= hour <= 24:
        return None
    if direction.lower() in ("to", "before"):
        hour, minutes = (hour - 1) % 24 or (12 if hour <= 12 else 0), 60 - minutes
    return Clock(hour, minutes, 0, _meridiem(mer1))
