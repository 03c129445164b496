"""Sequence-sharded encoding: each device encodes its slice with no communication.

Under ``jax.jit`` (no collective in the HLO) and eagerly (the table keeps the positions'
sharding).

Runs in a subprocess with 8 host CPU devices (XLA_FLAGS must be set before JAX starts).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HANG_TIMEOUT

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])  # tests/, for its conftest's assert_close

    import jax, jax.numpy as jnp, numpy as np, pe_core
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from conftest import assert_close

    assert len(jax.devices()) == 8, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("seq",))
    n, d, offset = 8 * 512, 64, 2**24 - 8 * 512
    positions = jax.device_put(
        offset + jnp.arange(n, dtype=jnp.int32), NamedSharding(mesh, P("seq"))
    )
    encode = jax.jit(lambda p: pe_core.encode(p, d))
    out = encode(positions)
    expected_sharding = NamedSharding(mesh, P("seq", None))
    assert out.sharding.is_equivalent_to(expected_sharding, 2), out.sharding
    single = pe_core.encode(np.arange(offset, offset + n), d, dtype="float64")
    checks = {"atol": 1e-6, "rtol": 1e-7, "backend": "jax", "dtype": "float32"}
    assert_close(out, single, **checks)
    hlo = encode.lower(positions).compile().as_text().lower()
    for collective in ("all-gather", "all-reduce", "all-to-all", "collective-permute", "reduce-scatter"):
        assert collective not in hlo, collective
    # each shard's rows are its own global positions
    for shard in out.addressable_shards:
        rows = shard.index[0]
        assert_close(shard.data, single[rows], **checks)
    # eagerly too: host-read positions give a table sharded like them, rows on their devices
    eager = pe_core.encode(positions, d)
    assert eager.sharding.is_equivalent_to(expected_sharding, 2), eager.sharding
    assert_close(eager, single, **checks)
    for shard in eager.addressable_shards:
        assert_close(shard.data, single[shard.index[0]], **checks)
    replicated = jax.device_put(positions, NamedSharding(mesh, P()))  # same values: no stale cache
    assert pe_core.encode(replicated, d).sharding.is_equivalent_to(NamedSharding(mesh, P()), 2)
    mesh2 = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "seq"))
    grid = np.arange(2 * 64).reshape(2, 64) + offset
    batch = jax.device_put(jnp.asarray(grid, dtype=jnp.int32), NamedSharding(mesh2, P("data", "seq")))
    eager2 = pe_core.encode(batch, d)
    assert eager2.sharding.is_equivalent_to(NamedSharding(mesh2, P("data", "seq", None)), 3)
    assert_close(eager2, pe_core.encode(grid, d, dtype="float64"), **checks)
    print("OK", len(out.addressable_shards))
    """
)


def test_sharded_encode_has_no_collectives() -> None:
    pytest.importorskip("jax")
    env = dict(
        os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu"
    )
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(Path(__file__).resolve().parent)],
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK 8" in result.stdout
