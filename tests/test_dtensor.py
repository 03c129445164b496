"""DTensor inputs: each rank computes its own shard, with no communication.

One launch per world size (2 and 4 gloo processes on the CPU, a file store for the
rendezvous) runs every case: ``apply_rope``, ``encode`` and the torch layers on DTensors
sharded on batch, heads, sequence or features, replicated, on 1-D and 2-D meshes, with
lengths the mesh does not divide (the last rank of four holds an empty shard). Each case
checks the placements and global shape, that the local values equal the matching slice
of the single-process result, and that no collective ran (a dispatch mode counting every
c10d and functional-collective op, as ``CommDebugMode`` does, and every
``torch.distributed`` collective patched to fail).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HANG_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import sys
    rank, world, store = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.utils._python_dispatch import TorchDispatchMode

    import pe_core
    from pe_core.layers.torch import RotaryEmbedding, SinusoidalEncoding, Timesteps

    class CommCount(TorchDispatchMode):
        # what CommDebugMode counts: every c10d / functional-collective op dispatched
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "c10d" in func.namespace:
                self.calls.append(str(func))
            return func(*args, **(kwargs or {}))

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)

    def shard(full, mesh, placements):
        # the matching slice of a full tensor, split locally (no scatter)
        return distribute_tensor(full, mesh, placements, src_data_rank=None)

    def check(name, got, full, mesh, placements, exact=False):
        assert isinstance(got, DTensor), (name, type(got))
        assert tuple(got.placements) == tuple(placements), (name, got.placements)
        assert got.device_mesh == mesh, name
        assert tuple(got.shape) == tuple(full.shape), (name, got.shape, full.shape)
        assert got.dtype == full.dtype, (name, got.dtype)
        expected = shard(full, mesh, placements).to_local()
        local = got.to_local()
        assert local.shape == expected.shape, (name, local.shape, expected.shape)
        if exact:  # RoPE: each value its own products and sums, whatever the shard
            assert torch.equal(local, expected), (name, (local - expected).abs().max())
        # an encoding's shard may take another (equally exact) route than the whole call
        torch.testing.assert_close(local, expected, rtol=2e-7, atol=2e-7, msg=name)
        assert got.stride() == full.stride(), (name, got.stride(), full.stride())

    def refuse(name, error, words, fn):
        try:
            fn()
        except error as exc:
            assert words in str(exc), (name, str(exc))
        else:
            raise AssertionError(f"{name}: no {error.__name__}")

    collectives = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast",
                   "reduce_scatter_tensor", "all_to_all_single", "scatter", "gather",
                   "send", "recv", "barrier", "reduce")
    saved = {name: getattr(dist, name) for name in collectives}

    def forbidden(name):
        def call(*args, **kwargs):
            raise AssertionError(f"collective {name} called")
        return call

    g = torch.Generator().manual_seed(0)
    B, H, D = 2, 4, 8
    S = 2 * world + 1  # not divisible: uneven shards (empty on the last of four ranks)
    x = torch.randn(B, H, S, D, generator=g)
    k = torch.randn(B, 2, S, D, generator=g)
    steps = torch.arange(S)
    per_example = torch.tensor([[[3]], [[1000]]]) + steps  # (B, 1, S)
    mesh = init_device_mesh("cpu", (world,))
    meshes = [mesh] + ([init_device_mesh("cpu", (2, 2))] if world == 4 else [])

    with CommCount() as probe:  # the counter sees a collective (an all-gather)
        shard(steps, mesh, [Shard(0)]).full_tensor()
    assert probe.calls, "the collective counter saw nothing"
    for name in collectives:
        setattr(dist, name, forbidden(name))
    cases = 0
    with CommCount() as comm:
        for m in meshes:
            # every 1-D layout on two ranks; on four, the uneven sequence split and a 2-D mesh
            layouts = [[Shard(0)], [Shard(1)], [Shard(2)], [Replicate()]] if world == 2 else [[Shard(2)]]
            if m.ndim == 2:
                layouts = [[Shard(0), Shard(2)], [Shard(2), Shard(2)]]
            for placements in layouts:
                xd, kd = shard(x, m, placements), shard(k, m, placements)
                # positions: a range, a plain tensor, per-example, replicated DTensor
                positions = [
                    ("range", range(S)),
                    ("tensor", steps + 2**20),
                    ("per-example", per_example),
                    ("replicated", shard(steps, m, [Replicate()] * m.ndim)),
                ]
                for label, pos in positions if world == 2 else positions[2:]:
                    plain = pos.full_tensor() if isinstance(pos, DTensor) else pos
                    check(f"rope {label} {placements}", pe_core.apply_rope(xd, pos),
                          pe_core.apply_rope(x, plain), m, placements, exact=True)
                    cases += 1
                if world == 4:  # the layers and pairs: on two ranks
                    continue
                for layout in ("interleaved", "half"):
                    # the (q, k) form: the single form's bits, sharded or whole
                    qr, kr = pe_core.apply_rope((xd, kd), range(S), layout=layout)
                    qe, ke = pe_core.apply_rope((x, k), range(S), layout=layout)
                    check(f"rope pair {placements}", qr, qe, m, placements, exact=True)
                    check(f"rope pair {placements}", kr, ke, m, placements, exact=True)
                    ks = pe_core.apply_rope(kd, range(S), layout=layout).to_local()
                    assert torch.equal(kr.to_local(), ks), f"rope single k {placements}"
                layer = RotaryEmbedding(D, scaling={"rope_type": "linear", "factor": 2.0})
                lq, lk = layer(xd, kd, offset=5)
                eq, ek = layer(x, k, offset=5)
                check(f"RotaryEmbedding {placements}", lq, eq, m, placements, exact=True)
                check(f"RotaryEmbedding {placements}", lk, ek, m, placements, exact=True)
                cases += 5

        # sequence-sharded positions beside sequence-sharded x: used as they are
        pd = shard(steps, mesh, [Shard(0)])
        check("rope sharded pos", pe_core.apply_rope(shard(x, mesh, [Shard(2)]), pd),
              pe_core.apply_rope(x, steps), mesh, [Shard(2)])
        # encode: positions sharded (1-D, uneven), replicated, 2-D along either axis
        for pos, placements in [
            (torch.arange(S) + 2**24, [Shard(0)]),
            (torch.arange(S), [Replicate()]),
            (per_example[:, 0], [Shard(1)]),
            (per_example[:, 0], [Shard(0)]),
        ]:
            check(f"encode {placements}", pe_core.encode(shard(pos, mesh, placements), 6),
                  pe_core.encode(pos, 6), mesh, placements)
            cases += 1
        check("encode float64 like", pe_core.encode(pd, 4, dtype="float64", like=pd),
              pe_core.encode(steps, 4, dtype="float64"), mesh, [Shard(0)])
        # timestep embeddings: on the shard, as encode (a negative scale, an odd width,
        # 2-D timesteps sharded on either axis, the diffusers layer)
        timesteps = per_example[:, 0] * 3 + 0.5  # (B, S) float timesteps
        for ts, placements, options in [
            (torch.arange(S) * 37, [Shard(0)], {}),
            (torch.arange(S) * 37, [Replicate()], {"scale": -3.0, "flip_sin_to_cos": True}),
            (timesteps, [Shard(1)], {"downscale_freq_shift": 0}),
            (timesteps, [Shard(0)], {"scale": 1000.0}),
        ]:
            for width in (8, 7):
                got = pe_core.timestep_embedding(shard(ts, mesh, placements), width, **options)
                check(f"timestep_embedding {placements} {options}", got,
                      pe_core.timestep_embedding(ts, width, **options), mesh, placements)
                cases += 1
        layer = Timesteps(16, flip_sin_to_cos=True, downscale_freq_shift=0)
        check("Timesteps", layer(shard(steps * 50, mesh, [Shard(0)])), layer(steps * 50), mesh,
              [Shard(0)])
        grid = pe_core.grid((S, 3))  # (S, 3, 2) coordinates, sharded on the rows
        check("encode N-D", pe_core.encode(shard(torch.as_tensor(grid), mesh, [Shard(0)]), 8,
                                           spec="mae_2d"),
              pe_core.encode(torch.as_tensor(grid), 8, spec="mae_2d"), mesh, [Shard(0)])
        if world == 2:
            # the sinusoidal layer: sequence, batch and feature shards, int and per-example offsets
            h = torch.randn(B, S, 4 * world, generator=g)
            for placements in ([Shard(1)], [Shard(0)], [Shard(2)], [Replicate()]):
                for offset in (7, torch.tensor([2, 40])):
                    layer = SinusoidalEncoding(4 * world, max_len=64)
                    check(f"SinusoidalEncoding {placements} {offset}",
                          layer(shard(h, mesh, placements), offset), layer(h, offset), mesh,
                          placements)
                    cases += 1
            seq_first = SinusoidalEncoding(4 * world, batch_first=False)
            hs = h.transpose(0, 1).contiguous()
            got = seq_first(shard(hs, mesh, [Shard(0)]), 3)
            check("SinusoidalEncoding seq-first", got, seq_first(hs, 3), mesh, [Shard(0)])

            # refused, with a clear error
            xs = shard(x, mesh, [Shard(2)])
            refuse("head_dim shard", ValueError, "last axis (head_dim)",
                   lambda: pe_core.apply_rope(shard(x, mesh, [Shard(3)]), range(S)))
            refuse("local positions", ValueError, "do not broadcast",
                   lambda: pe_core.apply_rope(xs, range(S - 1)))
            refuse("mismatched shards", ValueError, "otherwise than x",
                   lambda: pe_core.apply_rope(shard(x, mesh, [Shard(0)]), pd))
            refuse("plain x", TypeError, "x is not",
                   lambda: pe_core.apply_rope(x, pd))
            partial = DTensor.from_local(torch.zeros(S), mesh, [Partial()], run_check=False)
            refuse("partial", ValueError, "Partial", lambda: pe_core.encode(partial, 4))
            refuse("out", TypeError, "out=", lambda: pe_core.encode(pd, 4, out=pd))
            refuse("plain out", TypeError, "out=",
                   lambda: pe_core.encode(pd, 4, out=torch.empty(S, 4)))
            refuse("timesteps numpy", TypeError, "backend=",
                   lambda: pe_core.timestep_embedding(pd, 4, backend="numpy"))
            refuse("numpy", TypeError, "backend=", lambda: pe_core.encode(pd, 4, backend="numpy"))
            refuse("coordinate axis", ValueError, "coordinate axis",
                   lambda: pe_core.encode(shard(torch.as_tensor(grid), mesh, [Shard(2)]), 8,
                                          spec="mae_2d"))
    for name, function in saved.items():
        setattr(dist, name, function)
    assert not comm.calls, comm.calls

    # the metadata is right: the gathered result (communication, outside the checks) is
    # the single-process one
    full = pe_core.apply_rope(shard(x, mesh, [Shard(2)]), range(S)).full_tensor()
    torch.testing.assert_close(full, pe_core.apply_rope(x, range(S)), rtol=2e-7, atol=2e-7)
    dist.destroy_process_group()
    print("OK", rank, cases)
    """
)


@pytest.mark.slow  # process start dominates: one launch of `world` processes each
@pytest.mark.parametrize("world", [2, 4])
def test_dtensor_shards_compute_locally(world: int, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    env["OMP_NUM_THREADS"] = "1"
    store = tmp_path / "store"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(rank), str(world), str(store)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for rank in range(world)
    ]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=HANG_TIMEOUT)[0])  # guards against a hang only
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for rank, (proc, output) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, f"rank {rank}:\n{output}"
        assert f"OK {rank} " in output, output
