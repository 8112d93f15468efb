"""Repository invariants: the README's commands are what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    first_screen = text.split("## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", first_screen, flags=re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_readme_first_screen_has_exactly_two_setup_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("coopconsumer demo")
    assert "pytest" in commands[1]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert _readme_commands()[1] in ci_lines
