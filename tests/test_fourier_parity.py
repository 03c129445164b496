"""Fourier features against the installed peers' own modules and functions.

* transformers ``SamPositionalEmbedding`` (SAM's random positional embedding, shared by
  ``SamPromptEncoder``): ``fourier_features(2 * coords - 1, G)``;
* diffusers ``GaussianFourierProjection``: ``fourier_features(log(x) or x, W)``, with
  ``flip_sin_to_cos`` as ``order="cos_sin"``;
* transformers ``generate_fourier_features`` and ``build_linear_positions`` (Perceiver);
* diffusers ``get_fourier_embeds_from_boundingbox`` (GLIGEN).

The peers compute ``2pi x f`` in float32 and lose about ``2pi * 6e-8 * |x f|`` to
rounding; pe_core reduces it in turns. So each comparison allows the peer's float32
error, and checks that pe_core is the closer of the two to the float64 formula.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import pe_core

torch = pytest.importorskip("torch")

U = 2.0**-24


def peer_tolerance(angle_magnitude: np.ndarray) -> np.ndarray:
    """What float32 ``sin``/``cos`` of an angle formed in float32 may be off by."""
    return 8 * U * (1 + np.abs(angle_magnitude)) + 1e-6


def test_sam_positional_embedding():
    sam = pytest.importorskip("transformers.models.sam.modeling_sam")
    from transformers import SamVisionConfig

    torch.manual_seed(0)
    module = sam.SamPositionalEmbedding(SamVisionConfig(num_pos_feats=8, scale=5.0))
    g = module.positional_embedding.detach()
    points = torch.rand(1, 2, 5, 2) * 64  # pixel coordinates of a 64 x 48 image
    shape = (48, 64)  # (height, width)
    with torch.no_grad():
        theirs = module(points, input_shape=shape)
        grid = torch.rand(3, 4, 2)
        theirs_grid = module(grid)
    normalised = points / torch.tensor([shape[1], shape[0]], dtype=torch.float32)
    ours = pe_core.fourier_features(2 * normalised - 1, g.numpy())
    angle = 2 * np.pi * np.abs(2 * normalised.numpy() - 1) @ np.abs(g.numpy().astype(np.float64))
    assert_close(ours, theirs, atol=np.concatenate([peer_tolerance(angle)] * 2, -1))
    ours_grid = pe_core.fourier_features(2 * grid - 1, module.positional_embedding)
    assert ours_grid.requires_grad  # the module's Parameter: trainable through pe_core
    assert_close(ours_grid.detach(), theirs_grid, atol=1e-5)
    # the layer with SAM's matrix loaded
    from pe_core.layers.torch import FourierFeatures

    layer = FourierFeatures(2, 8, scale=5.0, trainable=True)
    layer.load_state_dict({"frequencies": g})
    assert_close(layer(2 * grid - 1).detach(), theirs_grid, atol=1e-5)
    # closer to the float64 formula than the module
    x64 = (2 * grid.double() - 1).numpy()
    theta = 2 * np.pi * (x64 @ g.double().numpy())
    exact = np.concatenate([np.sin(theta), np.cos(theta)], -1)
    ours_err = np.abs(ours_grid.detach().double().numpy() - exact).max()
    assert ours_err <= np.abs(theirs_grid.double().numpy() - exact).max() + 1e-7


@pytest.mark.parametrize(("log", "flip"), [(True, False), (False, True), (True, True)])
def test_gaussian_fourier_projection(log, flip):
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    torch.manual_seed(1)
    module = embeddings.GaussianFourierProjection(
        embedding_size=6, scale=16.0, log=log, flip_sin_to_cos=flip
    )
    sigma = torch.rand(7) * 80 + 0.002
    with torch.no_grad():
        theirs = module(sigma)
    x = torch.log(sigma) if log else sigma  # the module's own float32 log
    order = "cos_sin" if flip else "sin_cos"
    w = module.weight.detach()
    ours = pe_core.fourier_features(x, w.numpy(), order=order)  # host W: a fixed constant
    trained = pe_core.fourier_features(x, module.weight, order=order)  # the parameter
    angle = 2 * np.pi * np.abs(x.numpy()[:, None]) * np.abs(w.numpy()[None, :].astype(np.float64))
    tol = np.concatenate([peer_tolerance(angle)] * 2, -1)
    assert_close(ours, theirs, atol=tol)
    assert_close(trained.detach(), theirs, atol=tol)


@pytest.mark.parametrize(
    ("index_dims", "num_bands", "concat_pos", "sine_only"),
    [((6, 5), 4, True, False), ((7,), 3, False, True), ((3, 4, 2), 2, True, True)],
)
def test_perceiver_fourier_features(index_dims, num_bands, concat_pos, sine_only):
    perceiver = pytest.importorskip("transformers.models.perceiver.modeling_perceiver")
    positions = perceiver.build_linear_positions(index_dims)
    ours_positions = pe_core.perceiver_positions(index_dims, backend="torch")
    assert_close(ours_positions, positions, atol=2 * U)
    d = len(index_dims)
    pos = positions.reshape(1, -1, d).expand(2, -1, -1)  # (batch, points, d), as Perceiver
    resolution = tuple(2 * n for n in index_dims)
    theirs = perceiver.generate_fourier_features(
        pos, num_bands, max_resolution=resolution, concat_pos=concat_pos, sine_only=sine_only
    )
    ours = pe_core.perceiver_fourier_features(
        pos, num_bands, resolution, concat_pos=concat_pos, sine_only=sine_only
    )
    if not concat_pos:  # transformers then returns the first batch element's bands only
        assert theirs.shape == ours.shape[1:]
        theirs = theirs.expand(2, -1, -1)
    assert ours.shape == theirs.shape
    bound = np.pi * max(resolution) / 2 * 1.0  # |pos| <= 1, f <= r / 2
    assert_close(ours, theirs, atol=float(peer_tolerance(np.array(bound))))
    module = perceiver.PerceiverFourierPositionEncoding(
        num_bands, resolution, concat_pos=concat_pos, sine_only=sine_only
    )
    assert ours.shape[-1] == module.output_size()


def test_perceiver_bands_are_transformers_order():
    perceiver = pytest.importorskip("transformers.models.perceiver.modeling_perceiver")
    pos = torch.tensor([[[0.5, -0.25]]])
    theirs = perceiver.generate_fourier_features(pos, 3, max_resolution=(4, 8))
    ours = pe_core.perceiver_fourier_features(pos, 3, (4, 8))
    # [pos_1, pos_2, sin(pi f_1k pos_1) k=1..3, sin(pi f_2k pos_2), cos(...), cos(...)]
    f1, f2 = np.linspace(1, 2, 3), np.linspace(1, 4, 3)
    angles = np.pi * np.concatenate([0.5 * f1, -0.25 * f2])
    want = np.concatenate([[0.5, -0.25], np.sin(angles), np.cos(angles)])[None, None]
    assert_close(ours, want, atol=1e-6)
    assert_close(ours, theirs, atol=1e-6)


def test_gligen_box_embedding():
    embeddings = pytest.importorskip("diffusers.models.embeddings")
    torch.manual_seed(2)
    box = torch.rand(2, 3, 4)
    for embed_dim in (8, 5):
        theirs = embeddings.get_fourier_embeds_from_boundingbox(embed_dim, box)
        ours = pe_core.box_fourier_embedding(box, embed_dim)
        assert ours.shape == theirs.shape == (2, 3, embed_dim * 8)
        assert_close(ours, theirs, atol=float(peer_tolerance(np.array(100.0))))
    # pe_core's numbers are the float64 formula's
    w = 100.0 ** (np.arange(8) / 8)
    angle = box.double().numpy()[..., None] * w  # (2, 3, 4, 8)
    want = np.stack([np.sin(angle), np.cos(angle)], -1).transpose(0, 1, 3, 4, 2).reshape(2, 3, 64)
    assert_close(pe_core.box_fourier_embedding(box.numpy()), want, atol=2 * U)
