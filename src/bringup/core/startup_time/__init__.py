"""Startup-time prediction: how long a server takes from launch to ready, phase by phase
(:mod:`.model`, its fixed durations in :mod:`.constants`), and the live ETA (:mod:`.eta`)."""

from bringup.core.startup_time.model import (
    CompileCache,
    PhaseEstimate,
    StartupPrediction,
    StartupSetup,
    Storage,
    predict,
)

__all__ = [
    "CompileCache",
    "PhaseEstimate",
    "StartupPrediction",
    "StartupSetup",
    "Storage",
    "predict",
]
