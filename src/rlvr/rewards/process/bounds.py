"""The bounds of the process reward's reading (see the package docstring: the score runs in the
trainer's process, without the verifier pool's timeout). Anything beyond a bound is skipped,
never an error."""

#: At most this many steps are returned (and scored) per text.
MAX_STEPS = 64
#: At most this many ``=`` links are examined per text (steps or not).
MAX_LINKS = 256
#: A side of an equation longer than this (characters) is not read.
MAX_SIDE_CHARS = 200
#: Parentheses nested deeper than this are not read.
MAX_DEPTH = 16
#: A number with more digits than this is not read.
MAX_DIGITS = 30
#: An annotation ``<<...>>`` longer than this (characters inside) is not read.
MAX_ANNOTATION_CHARS = 300
