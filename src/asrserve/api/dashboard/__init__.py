"""The live dashboard at ``/``: static page plus one JSON endpoint it polls."""

from asrserve.api.dashboard.routes import router

__all__ = ["router"]
