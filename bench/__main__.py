"""`python -m bench` runs every benchmark in this folder, one after another."""
import importlib
import pkgutil
from pathlib import Path

if __name__ == "__main__":
    for module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
        print(f"== bench/{module}.py")
        importlib.import_module(f"bench.{module}").main()
