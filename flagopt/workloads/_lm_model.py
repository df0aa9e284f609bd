"""The decoder-only transformer of the reference workload: parameters, one layer, the loss, its FLOPs.

Layers are stacked on a leading axis so every mode can scan over them (one compiled layer, like
MaxText's ``scan_layers``). Parameters stay float32; each step casts them to the compute dtype before
use, so sharded parameters are gathered in the compute dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from flagopt.workloads._lm_config import LMConfig

Params = dict[str, Any]
Constrain = Callable[[str, jax.Array], jax.Array]

LAYER_KEYS = ("ln1", "wq", "wk", "wv", "wo", "ln2", "w1", "w2")


def _no_constraint(_name: str, x: jax.Array) -> jax.Array:
    return x


def compute_dtype(config: LMConfig) -> Any:
    """The activation/matmul dtype named by ``config.dtype``."""
    return jnp.bfloat16 if config.dtype == "bf16" else jnp.float32


def init_params(config: LMConfig, key: jax.Array) -> Params:
    """Random float32 parameters; per-layer arrays have a leading ``layers`` axis."""
    d, f, L, v = config.d_model, config.ff, config.layers, config.vocab
    keys = jax.random.split(key, 8)

    def normal(k: jax.Array, shape: tuple[int, ...], fan_in: int, scale: float = 1.0) -> jax.Array:
        return jax.random.normal(k, shape, jnp.float32) * (scale / np.sqrt(fan_in))

    # Output projections are scaled down with depth so the residual stream stays O(1) at init.
    out_scale = 1.0 / np.sqrt(2 * L)
    layers = {
        "ln1": jnp.ones((L, d), jnp.float32),
        "wq": normal(keys[0], (L, d, d), d),
        "wk": normal(keys[1], (L, d, d), d),
        "wv": normal(keys[2], (L, d, d), d),
        "wo": normal(keys[3], (L, d, d), d, out_scale),
        "ln2": jnp.ones((L, d), jnp.float32),
        "w1": normal(keys[4], (L, d, f), d),
        "w2": normal(keys[5], (L, f, d), f, out_scale),
    }
    return {
        "embed": jax.random.normal(keys[6], (v, d), jnp.float32),
        "unembed": normal(keys[7], (d, v), d),
        "final_norm": jnp.ones((d,), jnp.float32),
        "layers": layers,
    }


def _rms_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)


def layer(x: jax.Array, p: Params, heads: int, constrain: Constrain = _no_constraint) -> jax.Array:
    """One pre-norm block: causal multi-head self-attention, then a GELU MLP, each with a residual.

    ``x`` is ``(batch, seq, d_model)``; ``p`` holds one layer's arrays (no leading layer axis).
    ``constrain(name, array)`` lets a mode pin the sharding of named intermediates.
    """
    b, s, d = x.shape
    dh = d // heads
    h = _rms_norm(x, p["ln1"])
    q, k, v = (constrain("heads", (h @ p[w]).reshape(b, s, heads, dh)) for w in ("wq", "wk", "wv"))
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.sqrt(dh)
    causal = jnp.tril(jnp.ones((s, s), jnp.bool_))
    probs = jax.nn.softmax(jnp.where(causal, scores, -1e30), axis=-1).astype(x.dtype)
    attn = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, d)
    x = constrain("residual", x + attn @ p["wo"])
    h = _rms_norm(x, p["ln2"])
    hidden = constrain("hidden", jax.nn.gelu(h @ p["w1"]))
    return constrain("residual", x + hidden @ p["w2"])


def layer_stack(x: jax.Array, layers: Params, config: LMConfig,
                constrain: Constrain = _no_constraint) -> jax.Array:
    """Apply stacked layers (leading axis) in order with ``lax.scan``; rematerialised if asked."""

    def body(carry: jax.Array, p: Params) -> tuple[jax.Array, None]:
        return layer(carry, p, config.heads, constrain), None

    if config.remat:
        body = jax.checkpoint(body)
    y, _ = jax.lax.scan(body, x, layers)
    return y


def cast(params: Params, dtype: Any) -> Params:
    """Cast every array of ``params`` to ``dtype``."""
    return jax.tree.map(lambda a: a.astype(dtype), params)


def embed(params: Params, inputs: jax.Array, dtype: Any) -> jax.Array:
    """Token ids ``(..., seq)`` to activations ``(..., seq, d_model)`` in ``dtype``."""
    return params["embed"].astype(dtype)[inputs]


def head_loss(params: Params, x: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean next-token cross-entropy (float32) of final activations ``x`` against ``targets``."""
    h = _rms_norm(x, params["final_norm"])
    logits = (h @ params["unembed"].astype(x.dtype)).astype(jnp.float32)
    gold = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - gold)


def loss(params: Params, tokens: jax.Array, config: LMConfig,
         constrain: Constrain = _no_constraint) -> jax.Array:
    """Next-token cross-entropy of a ``(batch, seq + 1)`` token block (no pipelining)."""
    dtype = compute_dtype(config)
    x = constrain("residual", embed(params, tokens[:, :-1], dtype))
    y = layer_stack(x, cast(params["layers"], dtype), config, constrain)
    return head_loss(params, y, tokens[:, 1:])


def synthetic_tokens(config: LMConfig) -> np.ndarray:
    """A fixed ``(batch, seq + 1)`` int32 token block with learnable structure.

    Each next token follows a fixed random permutation of the vocabulary 80 % of the time and is
    uniform otherwise, so the loss can fall from ``ln(vocab)`` towards the noise floor.
    """
    rng = np.random.default_rng(config.seed + 1)
    successor = rng.permutation(config.vocab)
    tokens = np.empty((config.batch, config.seq + 1), np.int32)
    tokens[:, 0] = rng.integers(0, config.vocab, config.batch)
    noise = rng.random((config.batch, config.seq)) < 0.2
    random_next = rng.integers(0, config.vocab, (config.batch, config.seq))
    for t in range(config.seq):
        tokens[:, t + 1] = np.where(noise[:, t], random_next[:, t], successor[tokens[:, t]])
    return tokens


def matmul_params(config: LMConfig) -> int:
    """Parameters that take part in a matmul per token (the embedding lookup does not)."""
    d, f = config.d_model, config.ff
    return config.layers * (4 * d * d + 2 * d * f) + d * config.vocab


def model_flops_per_step(config: LMConfig) -> float:
    """Training FLOPs of one step: ``6 * params * tokens`` plus the attention score/value matmuls.

    Attention is counted as computed (the full ``seq x seq`` product, masked afterwards), forward and
    two backward passes: ``3 * 4 * seq * d_model`` per token and layer. Rematerialisation is not counted
    (model FLOPs, as MaxText reports them).
    """
    tokens = config.batch * config.seq
    attention = 12 * config.layers * config.seq * config.d_model
    return float(tokens) * (6 * matmul_params(config) + attention)


def sgd_update(params: Params, grads: Params, lr: float, clip: float = 1.0) -> Params:
    """Plain SGD with the gradient clipped to global norm ``clip`` (keeps big bf16 runs from diverging)."""
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in jax.tree.leaves(grads)))
    scale = lr * jnp.minimum(1.0, clip / (norm + 1e-6))
    return jax.tree.map(lambda p, g: p - scale * g, params, grads)
