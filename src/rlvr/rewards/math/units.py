"""Units of measurement attached to an answer (``5 cm``, ``3\\text{ kg}``, ``12 km/h``, ``5厘米``).

An answer's unit is kept beside its number so that the same number in a different unit is not
the same answer (``5 m`` is not ``5 cm``). A converted value is not accepted either (``50 mm``
for ``5 cm``): the labelling policy asks for the answer in the reference's unit. A unit on only
one side does not matter (``5`` answers ``5 cm``): datasets and models often leave units out.
Words that are not units of measurement (``apples``, ``ways``) are ignored.

>>> canonical_unit("centimeters"), canonical_unit("km/hr"), canonical_unit("平方米")
('cm', 'km/h', 'm^2')
"""

from __future__ import annotations

import re

# canonical names of units of measurement
_UNITS = frozenset({
    "mm", "cm", "dm", "m", "km", "in", "ft", "yd", "mi",              # length
    "mg", "g", "kg", "t", "lb", "oz",                                  # mass
    "ms", "s", "min", "h", "day", "week",                              # time
    "ml", "l", "cm^3", "m^3",                                          # volume
    "mm^2", "cm^2", "m^2", "km^2",                                     # area
    "m/s", "km/h", "mph",                                              # speed
})
_LENGTHS = frozenset({"mm", "cm", "dm", "m", "km", "in", "ft", "yd", "mi"})

# spellings -> canonical name (lower-cased lookups; "L"/"mL" are handled by lower-casing)
_ALIASES = {
    "millimeter": "mm", "millimetre": "mm", "centimeter": "cm", "centimetre": "cm",
    "decimeter": "dm", "meter": "m", "metre": "m", "kilometer": "km", "kilometre": "km",
    "inch": "in", "inches": "in", "foot": "ft", "feet": "ft", "yard": "yd", "mile": "mi",
    "milligram": "mg", "gram": "g", "kilogram": "kg", "tonne": "t", "ton": "t", "pound": "lb",
    "lbs": "lb", "ounce": "oz", "millisecond": "ms", "second": "s", "sec": "s", "secs": "s",
    "minute": "min", "mins": "min", "hour": "h", "hr": "h", "hrs": "h", "days": "day",
    "weeks": "week", "milliliter": "ml", "millilitre": "ml", "liter": "l", "litre": "l",
    "kph": "km/h", "kmh": "km/h", "km/hr": "km/h",
    "毫米": "mm", "厘米": "cm", "分米": "dm", "米": "m", "千米": "km", "公里": "km",
    "毫克": "mg", "克": "g", "千克": "kg", "公斤": "kg", "吨": "t",
    "秒": "s", "分钟": "min", "小时": "h", "天": "day", "周": "week", "星期": "week",
    "毫升": "ml", "升": "l",
    "平方厘米": "cm^2", "平方米": "m^2", "平方千米": "km^2", "立方厘米": "cm^3", "立方米": "m^3",
}

# Words that bound, deny or hedge a value ("at least 12", "12 or more", "not 12", "more than
# 12"): an answer carrying them does not state the value, so they are never dropped as units.
BOUND_WORDS_RE = re.compile(
    r"(?i)\b(?:at\s+(?:least|most)|(?:more|less|fewer|greater|larger|smaller|bigger|other|"
    r"rather)\s+than|or\s+(?:more|less|fewer|greater|higher|lower|so|above|below|smaller|"
    r"larger)|not|no\s+(?:more|less|fewer)|up\s+to|over|under|above|below|least|most|more|"
    r"less|fewer|than|except|maybe|perhaps|possibly|probably|either|neither|nor|any|"
    r"e\.g\.?|i\.e\.?|such\s+as|for\s+example|minimum|maximum)(?![A-Za-z])")


def canonical_unit(word: str) -> str | None:
    """The canonical name of a unit of measurement (``"centimeters"`` -> ``"cm"``,
    ``"m^{2}"`` -> ``"m^2"``, ``"厘米"`` -> ``"cm"``), or ``None`` if ``word`` is not one."""
    w = re.sub(r"\s+", "", word).replace("{", "").replace("}", "").strip(".")
    w = re.sub(r"^(?:square|sq\.?)(\w+)$", r"\1^2", w)
    w = re.sub(r"^(?:cubic|cu\.?)(\w+)$", r"\1^3", w)
    if not w:
        return None
    for cand in (w, w.lower()):
        base, power = re.fullmatch(r"(.+?)(\^[23])?", cand).groups()
        for b in (base, base[:-1] if base.endswith("s") and len(base) > 3 else None):
            if b is None:
                continue
            name = _ALIASES.get(b, b)
            key = name + (power or "")
            if key in _UNITS or (power and name in _LENGTHS):
                return key      # any length squared or cubed is an area or a volume
    return None
