"""The GPU check (``scripts/gpu_check.sh``): the service and its engines measured on a machine
reached one call at a time, with no network and at most 64 MiB carried per call.

Here, ``pack`` writes the payload (the wheels the machine lacks, each model as CTranslate2
int8 weights, the recordings) as stage folders that each fit one call; there, ``stage``
takes each in turn into a folder that lasts while the machine stays warm, and ``run``
measures and writes one JSON. Standard library only at import: ``stage`` runs before any
wheel is installed.
"""
