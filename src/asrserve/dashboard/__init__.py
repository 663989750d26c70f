"""The live dashboard at ``/``: static page plus one JSON endpoint it polls."""

from asrserve.dashboard.routes import router

__all__ = ["router"]
