"""FSDP and tensor-parallel (Megatron-style) train steps over a 1-D mesh of all devices.

Both are plain ``jax.jit`` programs with sharding annotations; XLA's SPMD partitioner inserts the
collectives (FSDP: parameter all-gathers and gradient reduce-scatters; TP: an all-reduce after each
row-parallel matmul). The pipeline mode lives in :mod:`flagopt.workloads._lm_pipeline`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from flagopt.workloads import _lm_model as model
from flagopt.workloads._lm_config import LMConfig

StepFn = Callable[[model.Params, jax.Array], tuple[model.Params, jax.Array]]


def _specs(mode: str, axis: str) -> tuple[dict[str, Any], P, dict[str, P]]:
    """Parameter specs, the token spec and the activation constraints of one mode."""
    if mode == "fsdp":
        # Every parameter is split along a d_model/d_ff axis; the batch is split too.
        col, row = P(None, axis, None), P(None, None, axis)
        layers = {"ln1": P(), "ln2": P(), "wq": col, "wk": col, "wv": col, "wo": col, "w1": col, "w2": row}
        params = {"embed": P(None, axis), "unembed": P(axis, None), "final_norm": P(), "layers": layers}
        batch = P(axis)
        acts = {"residual": P(axis), "heads": P(axis), "hidden": P(axis)}
    else:
        # Megatron: q/k/v and w1 are column-parallel (heads / d_ff split), wo and w2 row-parallel,
        # so each block needs one all-reduce forward; the batch is replicated.
        col, row = P(None, None, axis), P(None, axis, None)
        layers = {"ln1": P(), "ln2": P(), "wq": col, "wk": col, "wv": col, "wo": row, "w1": col, "w2": row}
        params = {"embed": P(), "unembed": P(), "final_norm": P(), "layers": layers}
        batch = P()
        acts = {"residual": P(), "heads": P(None, None, axis), "hidden": P(None, None, axis)}
    return params, batch, acts


def build_spmd(config: LMConfig, mesh: Mesh) -> tuple[model.Params, jax.Array, StepFn]:
    """Sharded parameters, sharded tokens and the jitted ``train_step`` for ``fsdp`` or ``tp``."""
    axis = mesh.axis_names[0]
    pspecs, batch_spec, act_specs = _specs(config.mode, axis)
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), pspecs,
                             is_leaf=lambda x: isinstance(x, P))
    act_shardings = {k: NamedSharding(mesh, v) for k, v in act_specs.items()}

    def constrain(name: str, x: jax.Array) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, act_shardings[name])

    def train_step(params: model.Params, tokens: jax.Array) -> tuple[model.Params, jax.Array]:
        value, grads = jax.value_and_grad(model.loss)(params, tokens, config, constrain)
        new = model.sgd_update(params, grads, config.lr)
        return new, value

    token_sharding = NamedSharding(mesh, batch_spec)
    step = jax.jit(train_step, in_shardings=(shardings, token_sharding),
                   out_shardings=(shardings, NamedSharding(mesh, P())), donate_argnums=0)
    init = jax.jit(lambda k: model.init_params(config, k), out_shardings=shardings)
    params = init(jax.random.PRNGKey(config.seed))
    tokens = jax.device_put(model.synthetic_tokens(config), token_sharding)
    return params, tokens, step
