"""`python -m bench` runs every benchmark in this folder (each module with a `main()`), in turn."""
import importlib
import pkgutil
from pathlib import Path

if __name__ == "__main__":
    for name in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
        module = importlib.import_module(f"bench.{name}")
        if callable(getattr(module, "main", None)):
            print(f"== bench/{name}.py", flush=True)
            module.main()
