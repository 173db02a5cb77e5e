"""Build a `rlvr verify` input from GSM8K: each reference solution as the completion, against
its own `#### N` answer (category `original`, should all be correct), and the same solution with
the final number changed by one (category `off_by_one`, should all be wrong).

Usage: python scripts/gsm8k_self_check.py GSM8K_TEST.jsonl OUT.jsonl
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from rlvr.io import atomic_write


def off_by_one(solution: str) -> str:
    """The solution with the number after its final ``####`` increased by one."""
    head, _, answer = solution.rpartition("####")
    value = int(answer.strip().replace(",", ""))
    return f"{head}#### {value + 1}"


def main(src: str, dst: str) -> int:
    path = Path(src)
    if not path.is_file():
        print(f"error: {src}: no such file (GSM8K test.jsonl expected)", file=sys.stderr)
        return 2
    rows = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        record = json.loads(line)
        if not re.search(r"####\s*-?[\d,]+\s*$", record["answer"]):
            print(f"error: {src}:{line_no}: answer does not end in '#### N'", file=sys.stderr)
            return 2
        base = {"task_type": "math", "reference": record["answer"], "source": "gsm8k/test",
                "prompt": record["question"]}
        rows.append({**base, "id": f"gsm8k-test-{line_no}", "category": "original",
                     "completion": record["answer"]})
        rows.append({**base, "id": f"gsm8k-test-{line_no}-off-by-one", "category": "off_by_one",
                     "completion": off_by_one(record["answer"])})
    with atomic_write(dst) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} completions to {dst}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
