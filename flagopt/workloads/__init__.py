"""Workloads shipped with flagopt: :mod:`flagopt.workloads.lm`, a reference JAX transformer benchmark."""
