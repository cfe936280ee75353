"""Each engine's analysis module: analysis/engines/<engine>.py, named like the engine's folder of
the experiment role (docs/extending.md). A module has NAME, evidence(engine_dir) (its summary of
the files the experiment fetched into engine/, None without them), events(engine_dir, run) (its
events on the driver clock, for the timeline around each fault) and report_rows(evidence) (the
report's rows of that summary); optionally checkpoint_age(run_dir, run, fault_start_ms) (how old
its last checkpoint was at a fault, for an engine that checkpoints). The generic analysis asks
every module found here."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def modules() -> list[ModuleType]:
    """Every engine module of this package, by name. Imported on first use, as each module
    uses analysis.engine and analysis.report, which use this package."""
    return [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    ]


def module_for(engine: str) -> ModuleType | None:
    """The engine's module, None for an engine without one."""
    return next((module for module in modules() if engine == module.NAME), None)
