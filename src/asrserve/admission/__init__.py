"""Bounded admission: how much unfinished work each priority class may hold."""

from asrserve.admission.base import Admission

__all__ = ["Admission"]
