"""GPipe-style pipeline-parallel train step: stages over devices, activations moved by ``ppermute``.

Device ``d`` owns stages ``d, d + n, d + 2n, ...`` (``repeats = stages / n``; more than one repeat is a
circular pipeline, as in MaxText). Every iteration each device runs its current stage on its current
microbatch and passes the result one device to the right, so a step takes
``microbatches * repeats + n - 1`` stage iterations; the ``n - 1`` extra ones are the pipeline bubble,
during which a device computes on zeros. More microbatches (for the same global batch) therefore
shrink the bubble's share of the step time. The backward pass is JAX's transpose of the same loop
(reversed ``ppermute``), i.e. GPipe's all-forward-then-all-backward schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from flagopt.workloads import _lm_model as model
from flagopt.workloads._lm_config import LMConfig
from flagopt.workloads._lm_parallel import StepFn


@dataclass(frozen=True)
class Schedule:
    """The static shape of one pipelined step.

    Example:
        >>> Schedule(devices=4, stages=4, microbatches=8).iterations
        11
    """

    devices: int
    stages: int
    microbatches: int

    @property
    def repeats(self) -> int:
        """Stages per device."""
        return self.stages // self.devices

    @property
    def iterations(self) -> int:
        """Stage iterations per forward pass, bubble included."""
        return self.microbatches * self.repeats + self.devices - 1

    @property
    def bubble_fraction(self) -> float:
        """Share of iterations in which a device has no real microbatch."""
        return (self.devices - 1) / self.iterations

    def item(self, w: jax.Array | int) -> tuple[jax.Array | int, jax.Array | int]:
        """(microbatch, repeat) of a device's ``w``-th work item; microbatches go round in groups of n."""
        n, r = self.devices, self.repeats
        return (w // (n * r)) * n + w % n, (w // n) % r

    def last_iterations(self) -> np.ndarray:
        """For each microbatch, the iteration at which the last device finishes it."""
        done = np.full(self.microbatches, -1)
        for w in range(self.microbatches * self.repeats):
            m, j = self.item(w)
            if j == self.repeats - 1:
                done[m] = w + self.devices - 1
        assert (done >= 0).all(), "schedule leaves a microbatch unfinished"
        return done


def _pipeline_loss(params: model.Params, tokens: jax.Array, *, config: LMConfig,
                   sched: Schedule, axis: str) -> jax.Array:
    """Per-device body under ``shard_map``: run the schedule, score on the last device."""
    n, M = sched.devices, sched.microbatches
    dtype = model.compute_dtype(config)
    d = jax.lax.axis_index(axis)
    stages = model.cast(jax.tree.map(lambda a: a[0], params["layers"]), dtype)  # (repeats, Ls, ...)
    blocks = tokens.reshape(M, -1, tokens.shape[-1])
    # Only device 0 reads it. Marking it varying here keeps the psum of its cotangent (which the
    # transpose of an implicit per-iteration broadcast would put inside the loop) to once per step.
    x_all = jax.lax.pcast(model.embed(params, blocks[:, :, :-1], dtype), (axis,), to="varying")
    ring = [(i, (i + 1) % n) for i in range(n)]

    def iteration(state: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
        w = jnp.clip(t - d, 0, M * sched.repeats - 1)
        m, j = sched.item(w)
        inp = jnp.where((d == 0) & (j == 0), x_all[m], state)
        stage = jax.tree.map(lambda a: a[j], stages)
        y = model.layer_stack(inp, stage, config)
        return jax.lax.ppermute(y, axis, ring), y

    # The carry differs per device (it is what the left neighbour sent), so mark it as varying.
    first = jax.lax.pcast(jnp.zeros(x_all.shape[1:], dtype), (axis,), to="varying")
    _, ys = jax.lax.scan(iteration, first, jnp.arange(sched.iterations))
    outs = ys[sched.last_iterations()]  # (M, mb, seq, d): real only on the last device
    value = model.head_loss(params, outs, blocks[:, :, 1:])
    return jax.lax.psum(jnp.where(d == n - 1, value, 0.0), axis)


def build_pipeline(config: LMConfig, mesh: Mesh) -> tuple[model.Params, jax.Array, StepFn, Schedule]:
    """Stage-sharded parameters, replicated tokens, the jitted ``train_step`` and its schedule."""
    axis = mesh.axis_names[0]
    n = mesh.devices.size
    sched = Schedule(devices=n, stages=config.stages or n, microbatches=config.num_pipeline_microbatches)
    per_stage = config.layers // sched.stages
    layer_spec = {k: P(axis) for k in model.LAYER_KEYS}
    pspecs = {"embed": P(), "unembed": P(), "final_norm": P(), "layers": layer_spec}
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), pspecs, is_leaf=lambda x: isinstance(x, P))

    def init(key: jax.Array) -> model.Params:
        params = model.init_params(config, key)
        # Layer l = (j * n + d) * per_stage + k goes to device d, repeat j, slot k: stage order is
        # layer order, so the pipelined network equals the unpipelined one.
        params["layers"] = jax.tree.map(
            lambda a: jnp.swapaxes(a.reshape(sched.repeats, n, per_stage, *a.shape[1:]), 0, 1),
            params["layers"])
        return params

    body = partial(_pipeline_loss, config=config, sched=sched, axis=axis)
    sharded_loss = jax.shard_map(body, mesh=mesh, in_specs=(pspecs, P()), out_specs=P())

    def train_step(params: model.Params, tokens: jax.Array) -> tuple[model.Params, jax.Array]:
        value, grads = jax.value_and_grad(sharded_loss)(params, tokens)
        return model.sgd_update(params, grads, config.lr), value

    replicated = NamedSharding(mesh, P())
    step = jax.jit(train_step, in_shardings=(shardings, replicated),
                   out_shardings=(shardings, replicated), donate_argnums=0)
    params = jax.jit(init, out_shardings=shardings)(jax.random.PRNGKey(config.seed))
    tokens = jax.device_put(model.synthetic_tokens(config), replicated)
    return params, tokens, step, sched
