"""The README's first-screen commands (the ```sh blocks of its Quick start), as written: `python3
.ci/readme_commands.py N` prints the Nth (0: the main job, 1: the tests). CI runs them from here, not from a copy."""

import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def first_screen_commands(readme: str) -> list[str]:
    """Each ```sh block of the README's Quick start section, stripped."""
    if "## Quick start" not in readme:
        raise ValueError("README.md has no '## Quick start' section to take the first-screen commands from")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.split("\n```", 1)[0].strip() for block in quick_start.split("```sh\n")[1:]]


if __name__ == "__main__":
    print(first_screen_commands(README.read_text(encoding="utf-8"))[int(sys.argv[1])])
