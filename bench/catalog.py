"""Catalog assembly cost at 50, 500 and 5000 tools (host, client and MCP, every rule active),
against a baseline that builds the same output dicts with a plain comprehension in the same run.

Run: `.venv/bin/python -m bench.catalog`. Targets (issue 15): the catalog at most 2x the bare
comprehension at every size, and linear to 5000 tools: per-tool cost at 5000 within 1.5x of the
per-tool cost at 50. Catalog and baseline rounds alternate, so load from other processes falls on
both alike; each figure is the best round.
"""
import time
from types import SimpleNamespace

from tools_app.catalog.catalog import CatalogInputs, HostSwitches, PermissionRule, assemble_catalog
from tools_app.catalog.clients import client_tools
from tools_app.catalog.registry import Tool

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def build_inputs(total):
    """A third each of host (some advanced, some session-group, some with hooks), client and MCP tools."""
    per_source = total // 3
    host = []
    for i in range(per_source):
        host.append(Tool(
            f"host_{i}", description=f"Host tool {i}", input_schema=SCHEMA,
            advanced_permission=i % 7 == 0, group="session" if i % 5 == 0 else None,
            is_enabled_for_session=(lambda s: s.enabled) if i % 3 == 0 else None,
            for_session=(lambda s: {"description": "worded"}) if i % 4 == 0 else None,
            instruction="Use it well." if i % 10 == 0 else None, defer_loading=i % 2 == 0,
        ))
    mcp = [Tool(f"t{i}", namespace="mcp.srv", description=f"MCP tool {i}", input_schema=SCHEMA, source="mcp")
           for i in range(per_source)]
    mcp = [Tool(t.effective_name, description=t.description, input_schema=SCHEMA, source="mcp") for t in mcp]
    client_defs = [{"name": f"c{i}", "description": f"Client tool {i}", "inputSchema": SCHEMA}
                   for i in range(total - 2 * per_source)]
    clients = ({"clientId": "ide", "tools": client_defs},)
    everything = [t.effective_name for t in host + mcp] + [f"ide__{d['name']}" for d in client_defs]
    return CatalogInputs(
        switches=HostSwitches(session_tools=True, session_tools_providers=("echo",), advanced_tools=True),
        provider="echo", chat_origin_kind="user", tools=tuple(host + mcp), client_tools=client_tools(clients),
        allowlist=tuple(everything), permission_rules=(PermissionRule("*", "allow"), PermissionRule("bash", "deny")),
        session=SimpleNamespace(enabled=True),
    )


def baseline(inputs):
    """The same output dicts, built with a plain comprehension and no rules."""
    snapshot_defs = [{"name": t.effective_name, "description": t.description, "inputSchema": t.input_schema}
                     for t in inputs.tools if t.source != "mcp"]
    client = [{"name": b.name, "description": b.tool.description, "inputSchema": b.tool.input_schema}
              for b in inputs.client_tools]
    mcp = [{"name": t.effective_name, "description": t.description, "inputSchema": t.input_schema}
           for t in inputs.tools if t.source == "mcp"]
    return snapshot_defs + client + mcp


MAX_RATIO = 2.0
MAX_PER_TOOL_GROWTH = 1.5


def best_of_alternating(fns, arg, repeats, rounds=51):
    """The best seconds per call of each of `fns`, timed in alternating rounds."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for index, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(repeats):
                fn(arg)
            best[index] = min(best[index], (time.perf_counter() - start) / repeats)
    return best


def verdict(met):
    return "met" if met else "NOT met"


def main():
    print(f"{'tools':>6} {'catalog us':>11} {'us/tool':>8} {'baseline us':>12} {'ratio':>6}")
    per_tool, ratios = {}, {}
    for total in (50, 500, 5000):
        inputs = build_inputs(total)
        offered = len(assemble_catalog(inputs).definitions)
        repeats = max(3, 20000 // total)
        catalog_s, base_s = best_of_alternating((assemble_catalog, baseline), inputs, repeats)
        per_tool[total] = catalog_s / total
        ratios[total] = catalog_s / base_s
        print(f"{total:>6} {catalog_s * 1e6:>11.1f} {per_tool[total] * 1e6:>8.3f} {base_s * 1e6:>12.1f} "
              f"{ratios[total]:>6.2f}   ({offered} offered)")
    worst = max(ratios.values())
    growth = per_tool[5000] / per_tool[50]
    print(f"worst ratio to the bare comprehension: {worst:.2f} "
          f"(target <= {MAX_RATIO:g}: {verdict(worst <= MAX_RATIO)})")
    print(f"per-tool cost at 5000 / at 50: {growth:.2f} "
          f"(target <= {MAX_PER_TOOL_GROWTH:g}: {verdict(growth <= MAX_PER_TOOL_GROWTH)})")


if __name__ == "__main__":
    main()
