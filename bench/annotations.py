"""The annotated share of functions, per package the house issue names and for the whole tree.

A function counts as annotated when mypy's `disallow_untyped_defs` and `disallow_incomplete_defs`
would pass it: every parameter annotated (a method's `self` or `cls` aside) and its return too
(`__init__` may leave the return out once a parameter is annotated). Nested functions count;
lambdas do not. Migrations are left out (Django writes them).

Run: `.venv/bin/python -m bench.annotations`, or with `--fail-under 90` to exit 1 when a named
package is below 90%.
"""
import argparse
import ast
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

from .servers import ROOT

# The packages whose every function is annotated (pyproject.toml's mypy override names them).
NAMED = ("kernel", "sessions_app/actions", "tools_app/catalog", "tools_app/runtime", "agents")
LEFT_OUT = {".venv", "var", "node_modules", "migrations", "build"}

Function = ast.FunctionDef | ast.AsyncFunctionDef


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        if not LEFT_OUT & set(path.relative_to(root).parts):
            yield path


def functions(tree: ast.AST) -> Iterator[tuple[Function, bool]]:
    """Every function in `tree`, and whether it is a method (its first parameter is self or cls)."""
    methods: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods.update(item for item in node.body if isinstance(item, Function))
        if isinstance(node, Function):
            yield node, node in methods and not is_static(node)


def is_static(function: Function) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list)


def is_annotated(function: Function, method: bool) -> bool:
    args = function.args
    parameters = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if method and parameters:
        parameters = parameters[1:]
    parameters += [a for a in (args.vararg, args.kwarg) if a is not None]
    if not all(p.annotation is not None for p in parameters):
        return False
    return function.returns is not None or (function.name == "__init__" and bool(parameters))


def count(path: Path) -> tuple[int, int]:
    """(annotated, functions) in the file at `path`."""
    found = [is_annotated(f, method) for f, method in functions(ast.parse(path.read_text(), str(path)))]
    return sum(found), len(found)


def in_package(relative: str, package: str) -> bool:
    """Whether `relative` (a file's path) is in `package`, a folder or a module without .py."""
    return relative == f"{package}.py" or relative.startswith(f"{package}/")


def shares(root: Path) -> list[tuple[str, int, int]]:
    """(name, annotated, functions) for each named package, the production code, tests/ and all."""
    per_file = {str(p.relative_to(root)): count(p) for p in python_files(root)}

    def total(name: str, pick: Callable[[str], bool]) -> tuple[str, int, int]:
        picked = [counts for relative, counts in per_file.items() if pick(relative)]
        return name, sum(a for a, _ in picked), sum(n for _, n in picked)

    rows = [total(package, partial(in_package, package=package)) for package in NAMED]
    rows.append(total("production code (all but tests/)", lambda r: not in_package(r, "tests")))
    rows.append(total("tests/", lambda r: in_package(r, "tests")))
    rows.append(total("the whole tree", lambda r: True))
    return rows


def percent(annotated: int, functions: int) -> float:
    return 100 * annotated / functions if functions else 100.0


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.annotations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fail-under", type=float, help="exit 1 when a named package's share is below this percent")
    args = parser.parse_args(list(argv))
    rows = shares(ROOT)
    print(f"{'package':<36} {'annotated':>9} {'functions':>9} {'share':>7}")
    for name, annotated, functions in rows:
        print(f"{name:<36} {annotated:>9} {functions:>9} {percent(annotated, functions):>6.1f}%")
    below = [name for name, annotated, functions in rows[:len(NAMED)]
             if args.fail_under is not None and percent(annotated, functions) < args.fail_under]
    if below:
        print(f"below {args.fail_under:g}%: {', '.join(below)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
