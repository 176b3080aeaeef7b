"""The unit tier stays fast: collecting it imports neither torch nor lmms-eval."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).parent
COLLECT = (
    "import sys, pytest\n"
    "code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', sys.argv[1]])\n"
    "heavy = [name for name in ('torch', 'lmms_eval', 'transformers', 'ray') if name in sys.modules]\n"
    "print('HEAVY', heavy)\n"
    "sys.exit(int(code) or (3 if heavy else 0))\n"
)


def test_collecting_the_unit_tier_imports_no_torch_or_lmms_eval():
    done = subprocess.run(
        [sys.executable, "-c", COLLECT, str(UNIT)], capture_output=True, text=True, timeout=300, cwd=UNIT.parents[1]
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "HEAVY []" in done.stdout
