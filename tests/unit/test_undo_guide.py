"""The undo guide's test sample runs as written."""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "undo.md"


def test_the_guides_test_sample_passes() -> None:
    text = GUIDE.read_text()
    section = text[text.index("## 4. Test it") :]
    (sample,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    exec(compile(sample, str(GUIDE), "exec"), {})
