"""``pe_core.integrations.torchscript``: scripted, saved and reloaded, it gives pe_core's numbers.

Every module is scripted with ``torch.jit.script``, saved with ``torch.jit.save`` and
loaded back once (a module-scoped cache); the loaded module is compared

* bit for bit with the eager pe_core call on device positions (``force_device_path``:
  the exact integer kernel the scripted forward restates), and
* with an mpmath reference (positions and frequencies taken as the exact binary numbers
  they are) within the float32 kernel's bound, at positions up to ``2**62``;
* with the eager call on CPU positions (the host route: float64 rounded once) within
  the same bound.

The layers of ``pe_core.layers.torch`` do not script; the documented alternative
(``torch.jit.trace`` at a fixed length) is checked, and so are the refusals.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mpmath = pytest.importorskip("mpmath")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pe_core  # noqa: E402
from pe_core._schedule import omegas  # noqa: E402
from pe_core.integrations import torchscript as ts  # noqa: E402
from pe_core.presets import resolve_spec  # noqa: E402
from pe_core.timestep import timestep_spec  # noqa: E402
from pe_core_backends import force_device_path  # noqa: E402

#: The float32 kernel's bound on sin/cos (the angle within a few 1e-7 rad, then one
#: rounding): docs/precision.md.
BOUND = 4e-7

#: Positions from 0 to 2**62: int64 beyond int32 and beyond float64's integers.
BIG = [0, 1, 7, 10**5, 123_457, 10**6, 10**7, 2**31 + 5, -(2**40) - 3, 2**53 + 1, 2**62]


@pytest.fixture(scope="module")
def reload(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Any], Any]:
    """``reload(key, module)``: the module scripted, saved, loaded (once per key)."""
    folder: Path = tmp_path_factory.mktemp("torchscript")
    cache: dict[str, Any] = {}

    def load(key: str, module: Any) -> Any:
        if key not in cache:
            path = folder / f"{len(cache)}.pt"
            with warnings.catch_warnings():  # TorchScript is deprecated upstream
                warnings.simplefilter("ignore", DeprecationWarning)
                torch.jit.save(torch.jit.script(module), str(path))
                cache[key] = torch.jit.load(str(path))
        return cache[key]

    return load


def mp_sin_cos(positions: list[int | float], omegas: list[float]) -> tuple[np.ndarray, ...]:
    """sin/cos of ``p * w`` in mpmath, ``p`` and ``w`` exact (integers stay integers)."""
    with mpmath.workdps(60):
        angles = [[mpmath.mpf(p) * mpmath.mpf(w) for w in omegas] for p in positions]
        sin = np.array([[float(mpmath.sin(a)) for a in row] for row in angles])
        cos = np.array([[float(mpmath.cos(a)) for a in row] for row in angles])
    return sin, cos


def bits_equal(a: Any, b: Any) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
    same = (a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else a == b
    assert bool(same.all()), (a, b)


def within(actual: Any, expected: np.ndarray, bound: float = BOUND) -> None:
    error = np.abs(actual.double().numpy() - expected)
    assert error.max() <= bound, error.max()


SPECS = {
    "vaswani": (8, None),
    "whisper_split": (8, "whisper"),
    "timestep_flip_odd": (9, timestep_spec(9, True, 0)),
    "timestep_scale_1000": (8, timestep_spec(8, False, 1, scale=1000.0)),
    "offset": (6, pe_core.Spec(offset=3, layout="split")),
}

POSITIONS = {
    "int64": torch.tensor(BIG),
    "int32": torch.tensor([0, 5, -7, 10**7, 2**31 - 1], dtype=torch.int32),
    "float32": torch.tensor([0.0, 0.5, 1e5, 3.25e6, -3.25, 2.0**40], dtype=torch.float32),
}


@pytest.mark.parametrize("spec_key", SPECS)
@pytest.mark.parametrize("pos_key", POSITIONS)
def test_sinusoidal_is_encode(reload: Any, spec_key: str, pos_key: str) -> None:
    d, spec = SPECS[spec_key]
    scripted = reload(spec_key, ts.Sinusoidal(d, spec=spec))
    positions = POSITIONS[pos_key]
    got = scripted(positions)
    with force_device_path():
        bits_equal(got, pe_core.encode(positions, d, spec=spec))
    within(got, np.asarray(pe_core.encode(positions.numpy(), d, spec=spec)))
    # the reference: the spec's float64 frequencies, sin-first split table, laid out
    resolved = resolve_spec(spec)
    freqs = list(omegas(d, resolved))
    shifted = [v + resolved.offset for v in positions.tolist()]
    sin, cos = mp_sin_cos(shifted, freqs)
    first, second = (cos, sin) if resolved.order == "cos_sin" else (sin, cos)
    if resolved.layout == "interleaved":
        table = np.stack([first, second], -1).reshape(len(shifted), -1)
    else:
        table = np.concatenate([first, second], -1)
    if d % 2:
        table = np.concatenate([table, np.zeros((len(shifted), 1))], -1)
    within(got, table)


def test_sinusoidal_nan_and_float64(reload: Any) -> None:
    """Invalid float positions give NaN rows, as on a device; float64 works in float64."""
    scripted = reload("vaswani", ts.Sinusoidal(8))
    got = scripted(torch.tensor([1.0, float("nan"), float("inf"), 2.0**63]))
    assert not got[0].isnan().any() and got[1:].isnan().all()
    wide = reload("float64", ts.Sinusoidal(8, dtype=torch.float64))
    table = wide(torch.tensor([10**7, 2**62]))
    assert table.dtype == torch.float64
    sin, cos = mp_sin_cos([10**7, 2**62], list(omegas(8, pe_core.Spec())))
    within(table, np.stack([sin, cos], -1).reshape(2, 8), 1e-12)


@given(
    st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=6),
    st.sampled_from([(-1,), (1, -1), (-1, 1)]),
)
def test_sinusoidal_any_int64(reload: Any, values: list[int], shape: tuple[int, ...]) -> None:
    scripted = reload("vaswani", ts.Sinusoidal(8))
    positions = torch.tensor(values).reshape(shape)
    got = scripted(positions)
    assert got.shape == (*positions.shape, 8)
    with force_device_path():
        bits_equal(got, pe_core.encode(positions, 8))
    sin, cos = mp_sin_cos(values, list(omegas(8, pe_core.Spec())))
    within(got.reshape(-1, 8), np.stack([sin, cos], -1).reshape(len(values), 8))


ROPES = {
    "default": (16, None),
    "interleaved_partial": (16, pe_core.RopeSpec(layout="interleaved", rotary_dim=8)),
    "yarn_config": (
        {
            "hidden_size": 64,
            "num_attention_heads": 4,
            "partial_rotary_factor": 0.5,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 4.0,
                "rope_theta": 1e4,
                "original_max_position_embeddings": 2048,
            },
        },
        None,
    ),
}


@pytest.mark.parametrize("rope_key", ROPES)
@pytest.mark.parametrize("layout", [None, "half_width"])
def test_rope_cos_sin_is_rope_cos_sin(reload: Any, rope_key: str, layout: str | None) -> None:
    head_dim, spec = ROPES[rope_key]
    scripted = reload(f"cos_sin_{rope_key}_{layout}", ts.RopeCosSin(head_dim, spec, layout))
    positions = torch.tensor(BIG)
    got = scripted(positions)
    with force_device_path():
        want = pe_core.rope_cos_sin(positions, head_dim, spec=spec, layout=layout)
    host = pe_core.rope_cos_sin(positions.numpy(), head_dim, spec=spec, layout=layout)
    for g, w, h in zip(got, want, host, strict=True):
        bits_equal(g, w)
        within(g, np.asarray(h), BOUND * 1.2)  # yarn's attention factor 1.14


@pytest.mark.parametrize("rope_key", ["default", "interleaved_partial"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rope_is_apply_rope(reload: Any, rope_key: str, dtype: str) -> None:
    head_dim, spec = ROPES[rope_key]
    scripted = reload(f"rope_{rope_key}", ts.Rope(head_dim, spec))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, len(BIG), head_dim, generator=generator).to(getattr(torch, dtype))
    positions = torch.tensor(BIG)
    got = scripted(x, positions)
    with force_device_path():
        bits_equal(got, pe_core.apply_rope(x, positions, spec=spec))
    # the reference rotation: mpmath cos/sin, float64 products
    inv_freq, _ = (spec or pe_core.RopeSpec()).constants(head_dim)
    sin, cos = mp_sin_cos(BIG, list(inv_freq))
    half = len(inv_freq)
    xs = x.double().numpy()
    if (spec or pe_core.RopeSpec()).layout == "half":
        a, b = xs[..., :half], xs[..., half : 2 * half]
        ref = np.concatenate([a * cos - b * sin, b * cos + a * sin, xs[..., 2 * half :]], -1)
    else:
        a, b = xs[..., 0 : 2 * half : 2], xs[..., 1 : 2 * half : 2]
        pairs = np.stack([a * cos - b * sin, b * cos + a * sin], -1).reshape(*a.shape[:-1], -1)
        ref = np.concatenate([pairs, xs[..., 2 * half :]], -1)
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    if dtype == "bfloat16":
        ulp = ulp * 2.0**16
    bound = 0.5 * ulp + 3e-7 * np.abs(xs).sum(-1, keepdims=True)
    assert (np.abs(got.double().numpy() - ref) <= bound).all()


def test_rope_refuses_float64_x_and_length_dependent_ropes(reload: Any) -> None:
    scripted = reload("rope_default", ts.Rope(16))
    with pytest.raises(Exception, match=r"dtype=torch\.float64"):
        scripted(torch.ones(2, 16, dtype=torch.float64), torch.arange(2))
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}
    config["max_position_embeddings"] = 64
    with pytest.raises(ValueError, match="max\\(positions\\)"):
        ts.RopeCosSin(config)


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_is_alibi_bias(reload: Any, causal: bool) -> None:
    scripted = reload(f"alibi_{causal}", ts.AlibiBias(12, causal=causal))
    got = scripted(5, 9)
    bits_equal(got, pe_core.alibi_bias(5, 9, 12, causal=causal, backend="torch"))
    # float32 slope times float32 distance, rounded once (exact in float64 first)
    slopes = pe_core.alibi_slopes(12).astype(np.float32).astype(np.float64)
    offset = np.arange(9)[None, :] - (np.arange(5)[:, None] + 4)
    offset = np.where(offset > 0, -np.inf, offset) if causal else -np.abs(offset)
    ref = (slopes[:, None, None] * offset).astype(np.float32)
    assert np.array_equal(got.numpy(), ref)


T5_CONFIGS = {
    "t5": {},
    "causal": {"bidirectional": False},
    "exact_wide": {"num_buckets": 64, "max_distance": 10**6, "arithmetic": "exact"},
}


@pytest.mark.parametrize("key", T5_CONFIGS)
def test_t5_buckets_is_t5_relative_bucket(reload: Any, key: str) -> None:
    config = T5_CONFIGS[key]
    scripted = reload(f"t5_{key}", ts.T5Buckets(**config))
    extremes = [-(2**63), 2**63 - 1, -(2**31), 2**31, -(10**6), 10**6, 0]
    for rel in (
        torch.arange(-3000, 3000, 7),
        torch.tensor(extremes),
        torch.tensor([-(2**31), 2**31 - 1, 5, -5], dtype=torch.int32),
    ):
        bits_equal(scripted(rel), pe_core.t5_relative_bucket(rel, **config))


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8))
def test_t5_buckets_any_int64(reload: Any, values: list[int]) -> None:
    scripted = reload("t5_t5", ts.T5Buckets())
    bits_equal(scripted(torch.tensor(values)), pe_core.t5_relative_bucket(torch.tensor(values)))


def test_functions_script_on_their_own() -> None:
    """The building blocks script alone, and refuse what they do not take."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rotate = torch.jit.script(ts.rotate)
        turns = torch.jit.script(ts.exact_turns)
    out = rotate(torch.tensor([1.0, 0.0]), torch.tensor([0.0]), torch.tensor([1.0]), "half")
    assert out.tolist() == [0.0, 1.0]
    constants = ts.Sinusoidal(2).constants_of(torch.tensor([0]))
    with pytest.raises(Exception, match="integer or floating"):
        turns(torch.tensor([True]), *constants, None)


def test_layers_do_not_script_and_trace_at_a_fixed_length() -> None:
    """The documented refusal and its alternatives: the layers' Python front door does
    not script; ``torch.jit.trace`` records the traced length's encoding."""
    from pe_core.layers.torch import SinusoidalEncoding

    layer = SinusoidalEncoding(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(Exception):  # noqa: B017 (TorchScript's own error types vary)
            torch.jit.script(layer)
        with pytest.raises(Exception):  # noqa: B017
            torch.jit.script(pe_core.encode)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the length is fixed
        traced = torch.jit.trace(layer, torch.zeros(1, 5, 8), check_trace=False)
    x = torch.randn(2, 5, 8)
    bits_equal(traced(x), layer(x))


def test_scripting_warns_and_the_module_leaves_warnings_alone() -> None:
    """``torch.jit.script`` warns that TorchScript is deprecated (torch's warning, left
    to the caller's filters): the module neither silences it nor touches any filter."""
    with pytest.warns(DeprecationWarning, match="torch.jit.script"):
        torch.jit.script(ts.AlibiBias(2))
    source = Path(ts.__file__).read_text()
    assert "import warnings" not in source and "filterwarnings" not in source


class Tiny(torch.nn.Module):
    """The model of docs/deploying.md's TorchScript section."""

    def __init__(self, d_model: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.pe = ts.Sinusoidal(d_model)
        self.rope = ts.Rope(d_model // heads)

    def forward(self, x: torch.Tensor, offset: int) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(x.shape[1], device=x.device) + offset
        h = x + self.pe(positions)
        q = h.unflatten(-1, (self.heads, -1)).transpose(1, 2)  # (batch, heads, seq, hd)
        return h, self.rope(q, positions)


def test_a_model_holding_the_modules_scripts_whole(reload: Any) -> None:
    model = Tiny().eval()
    served = reload("tiny", model)
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(1))
    for got, want in zip(served(x, 10**6), model(x, 10**6), strict=True):
        bits_equal(got, want)
    h, _ = served(torch.zeros(1, 1, 64), 10**6)
    within(h[0], np.asarray(pe_core.encode([10**6], 64, dtype="float64")))
