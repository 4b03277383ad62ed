"""The README's "Where the code lives" names every module, and nothing that is gone: a newcomer's
map that stays true."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEFT_OUT = {"migrations", "tests", ".venv", "var", "node_modules"}


def named_in_readme() -> set[str]:
    section = (ROOT / "README.md").read_text().split("## Where the code lives", 1)[1].split("\n## ", 1)[0]
    named: set[str] = set()
    stack: list[str] = []
    for line in section.split("```", 2)[1].splitlines()[1:]:
        if not line.strip() or line.startswith(" " * 30):  # a description's continuation
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        stack = stack[:depth]
        for name in re.split(r"\s{2,}", line.strip())[0].split(", "):
            if name.endswith("/"):
                stack = stack[:depth] + [name]
            else:
                named.add("".join(stack) + name)
    return named


def test_the_readme_names_every_module_and_no_other():
    modules = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
               if not LEFT_OUT & set(p.relative_to(ROOT).parts)}
    named = named_in_readme()
    assert sorted(modules - named) == [], "modules the README's map does not name"
    assert sorted(n for n in named - modules if n.endswith(".py")) == [], "named in the README but gone"
