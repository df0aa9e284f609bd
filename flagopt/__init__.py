"""flagopt: find the XLA flags, NCCL variables and workload settings that make one JAX job fastest.

The flow, one module (or folder) per step::

    space  ->  render  ->  executors  ->  logs  ->  failures  ->  stats  ->  study  ->  report / export / evidence

* :mod:`flagopt.space` reads and validates a search-space YAML file.
* :mod:`flagopt.render` turns a trial's choices into argv, environment and ``XLA_FLAGS``.
* :mod:`flagopt.executors` runs a rendered trial (locally or on Slurm) through submitit.
* :mod:`flagopt.logs` parses MaxText-format step lines into per-step samples.
* :mod:`flagopt.failures` classifies a failed run from its log, exit code and scheduler state.
* :mod:`flagopt.stats` holds the noise model and the statistical verdicts (pure functions).
* :mod:`flagopt.study` drives the Optuna study: what to run next, when to stop.
* :mod:`flagopt.report`, :mod:`flagopt.export`, :mod:`flagopt.evidence` read the study records.
"""

from __future__ import annotations

__version__ = "0.1.0"
