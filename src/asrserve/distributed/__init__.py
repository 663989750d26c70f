"""The distributed mode: API and worker nodes sharing one Redis (see docs/deployment.md)."""
