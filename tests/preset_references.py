"""Independent NumPy restatements of sinusoidal positional encodings, used as test oracles.

Each function below restates, line by line, the formula that one public codebase
computes. The signature is always::

    fn(positions: numpy.ndarray, d: int, *, float32: bool = False, **codebase_kwargs)
        -> numpy.ndarray of shape positions.shape + (d,)

``positions`` are positions as pe_core counts them (0 = first token). Where the
codebase indexes its table with a different row (fairseq), the function converts
and says so in its docstring.

``float32=False``: everything is computed in float64 (the codebase's formula,
with its order of operations, evaluated in double precision). The result is float64.

``float32=True``: every value is rounded to float32 where the codebase works in
float32 (positions, scalars such as ``-log(10000)/d``, each product or quotient),
so float32 products and quotients match IEEE float32 exactly. Transcendental
functions (exp, sin, cos, pow) on float32 inputs are evaluated in float64 and
then rounded to float32, i.e. the correctly rounded float32 result. The
codebase's own float32 libm (torch/TF/XLA) can differ from that by about 1 ulp,
and a 1-ulp difference in a frequency is multiplied by the position, so compare
float32 outputs with ``abs(ref - got) <= 4 * 2**-23 * max(1, |angle|)``
(angle = position * frequency). Checked against the real torch/TF/Keras code
for d up to 1024 and 8192 positions: the worst case was 3 of these units.
Codebases that compute in float64 and only store float32 (flax
examples, DistilBERT) are restated that way: float64, then rounded once.

Where a codebase fails (raises, or yields NaN), the restatement does the same:
it raises ``ValueError`` where the codebase raises and returns NaN where the
codebase returns NaN. This is so tests can pin down where pe_core and each
codebase agree.

Sources read (public repositories):

* textbook PyTorch ``PositionalEncoding`` / ``SinusoidalPositionalEncoding``
  (the tutorial seeds this project grew from, shared/seeds/000_c1d67e8b74097198.txt and
  003_62a9f8b665972f23.txt)
* tensorflow/tensor2tensor tensor2tensor/layers/common_attention.py,
  ``get_timing_signal_1d``
* facebookresearch/fairseq fairseq/modules/sinusoidal_positional_embedding.py
  (``SinusoidalPositionalEmbedding.get_embedding`` and ``forward``) and
  fairseq/utils.py (``make_positions``)
* openai/whisper whisper/model.py, ``sinusoids``
* google/flax examples/wmt/models.py and examples/lm1b/models.py,
  ``sinusoidal_init`` (current, 2024 version)
* keras-team/keras-hub keras_hub/src/layers/modeling/sine_position_encoding.py,
  ``SinePositionEncoding.call``
* huggingface/transformers src/transformers/models/distilbert/modeling_distilbert.py,
  ``create_sinusoidal_embeddings`` / ``_create_sinusoidal_embeddings``
* tatp22/multidim-positional-encoding (PyPI ``positional-encodings``)
  positional_encodings/torch_encodings.py, ``PositionalEncoding1D``
"""

import math

import numpy as np

__all__ = [
    "PRESET_OF",
    "REFERENCES",
    "diffusers_timestep_flipped",
    "distilbert",
    "fairseq",
    "flax_sinusoidal_init",
    "keras_hub_sine",
    "musicgen",
    "positional_encodings_1d",
    "tensor2tensor",
    "textbook_torch",
    "whisper",
]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _pos(positions, float32):
    """Positions as the codebase's float type (codebases build them with an
    integer ``arange`` then cast, so cast here the same way)."""
    p = np.asarray(positions)
    return p.astype(np.float32 if float32 else np.float64)


def _f32(fn, x):
    """Float32 transcendental: input already rounded to float32; evaluate in
    float64 and round the result once to float32 (correctly rounded)."""
    x = np.asarray(x, dtype=np.float32)
    return fn(x.astype(np.float64)).astype(np.float32)


def _f32_pow(base, expo):
    """Float32 ``pow(base, expo)`` with both operands rounded to float32 first."""
    b = np.float64(np.float32(base))
    e = np.asarray(expo, dtype=np.float32).astype(np.float64)
    return np.power(b, e).astype(np.float32)


def _sin(x, float32):
    return _f32(np.sin, x) if float32 else np.sin(x)


def _cos(x, float32):
    return _f32(np.cos, x) if float32 else np.cos(x)


def _exp(x, float32):
    return _f32(np.exp, x) if float32 else np.exp(x)


def _dtype(float32):
    return np.float32 if float32 else np.float64


# ---------------------------------------------------------------------------
# 1. textbook PyTorch module
# ---------------------------------------------------------------------------


def textbook_torch(positions, d, *, float32=False):
    """Textbook PyTorch ``PositionalEncoding`` (local seeds 000 and 003).

    Restates (seed 000 ``PositionalEncoding.__init__``; seed 003
    ``SinusoidalPositionalEncoding.__init__`` is the same with float positions)::

        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)

    Interleaved [sin w0, cos w0, sin w1, ...], w_i = exp(2i * -(ln 10000 / d)),
    i.e. 10000^(-2i/d). Row k of the table is position k (no offset).

    float32: torch computes ``-(log(10000)/d)`` in Python double, rounds it to
    float32 when multiplying the integer ``arange`` (promoted to float32), then
    float32 exp, float32 position * div_term, float32 sin/cos.

    Odd d >= 3: the module raises (``pe[:, 1::2]`` has d//2 columns but the cos
    term has d//2 + 1), so this raises ValueError. d = 1 does NOT raise in torch
    (the (L, 1) cos term broadcasts into the (L, 0) slice): the table is sin(p).
    """
    if d % 2 == 1 and d > 1:
        raise ValueError(
            "textbook PositionalEncoding fails for odd d_model: pe[:, 1::2] has "
            "d//2 columns but cos(position * div_term) has d//2 + 1"
        )
    two_i = np.arange(0, d, 2)
    scale = -(math.log(10000.0) / d)
    p = _pos(positions, float32)
    if float32:
        div_term = _exp(two_i.astype(np.float32) * np.float32(scale), True)
    else:
        div_term = np.exp(two_i.astype(np.float64) * scale)
    angle = p[..., None] * div_term
    pe = np.zeros(p.shape + (d,), dtype=_dtype(float32))
    pe[..., 0::2] = _sin(angle, float32)
    pe[..., 1::2] = _cos(angle, float32)
    return pe


# ---------------------------------------------------------------------------
# 2. tensor2tensor
# ---------------------------------------------------------------------------


def tensor2tensor(positions, d, *, float32=False, min_timescale=1.0, max_timescale=1.0e4):
    """tensor2tensor ``get_timing_signal_1d`` (tensorflow/tensor2tensor,
    tensor2tensor/layers/common_attention.py, current version with
    ``start_index`` and the ``tf.maximum(..., 1)`` guard)::

        position = tf.to_float(tf.range(length) + start_index)
        num_timescales = channels // 2
        log_timescale_increment = (
            math.log(float(max_timescale) / float(min_timescale)) /
            tf.maximum(tf.to_float(num_timescales) - 1, 1))
        inv_timescales = min_timescale * tf.exp(
            tf.to_float(tf.range(num_timescales)) * -log_timescale_increment)
        scaled_time = tf.expand_dims(position, 1) * tf.expand_dims(inv_timescales, 0)
        signal = tf.concat([tf.sin(scaled_time), tf.cos(scaled_time)], axis=1)
        signal = tf.pad(signal, [[0, 0], [0, tf.mod(channels, 2)]])

    Split layout [sin w_0..w_{n-1} | cos w_0..w_{n-1}], n = d // 2,
    w_i = min_timescale * (min_timescale/max_timescale)^(i / max(n - 1, 1)).
    Odd d: one zero column appended at the end.

    Quirk: ``min_timescale`` MULTIPLIES ``inv_timescales`` (w_0 = min_timescale),
    although the docstring describes sin(timestep/timescale) with timescales from
    min_timescale to max_timescale. The two agree only for min_timescale == 1
    (the default). Older versions (before ``start_index``) divide by
    ``num_timescales - 1`` with no guard (d in {2, 3} gives inf/NaN there).

    ``start_index`` is an offset: ``get_timing_signal_1d(L, d, start_index=s)[0, k]``
    equals ``tensor2tensor(k + s, d)``; here positions are passed directly.

    float32: TF works in float32 throughout: position cast to float32; the
    Python double ``math.log(max/min)`` becomes a float32 constant and is divided
    by the float32 ``max(n - 1, 1)``; float32 range * -increment; float32 exp;
    float32(min_timescale) * exp; float32 product with position; float32 sin/cos.
    """
    n = d // 2
    p = _pos(positions, float32)
    if float32:
        inc = np.float32(math.log(float(max_timescale) / float(min_timescale))) / np.maximum(
            np.float32(n) - np.float32(1), np.float32(1)
        )
        inv = np.float32(min_timescale) * _exp(np.arange(n, dtype=np.float32) * -inc, True)
    else:
        inc = math.log(float(max_timescale) / float(min_timescale)) / max(n - 1.0, 1.0)
        inv = min_timescale * np.exp(np.arange(n, dtype=np.float64) * -inc)
    scaled_time = p[..., None] * inv
    signal = np.concatenate([_sin(scaled_time, float32), _cos(scaled_time, float32)], axis=-1)
    if d % 2:
        pad = np.zeros(p.shape + (1,), dtype=signal.dtype)
        signal = np.concatenate([signal, pad], axis=-1)
    return signal.astype(_dtype(float32))


# ---------------------------------------------------------------------------
# 3. fairseq
# ---------------------------------------------------------------------------


def fairseq(positions, d, *, float32=False, padding_idx=1):
    """fairseq ``SinusoidalPositionalEmbedding`` (facebookresearch/fairseq,
    fairseq/modules/sinusoidal_positional_embedding.py ``get_embedding`` and
    ``forward``; fairseq/utils.py ``make_positions``)::

        half_dim = embedding_dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
        emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
        if embedding_dim % 2 == 1:
            emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)  # zero pad
        if padding_idx is not None:
            emb[padding_idx, :] = 0

    and ``make_positions``: ``mask = tensor.ne(padding_idx).int();
    (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx`` --
    the k-th non-pad token (k = 0, 1, ...) gets table row ``k + padding_idx + 1``
    (also in incremental decoding: row ``padding_idx + timestep + 1``).

    ROW CONVERSION: pe_core position p is fairseq table row
    ``r = p + padding_idx + 1``; the angle is ``r * w_i``. With fairseq's usual
    ``padding_idx = 1`` (Dictionary: bos=0, pad=1, eos=2, unk=3), position 0
    is row 2, i.e. offset 2. Row ``padding_idx`` is zeroed (pe_core position -1;
    never reached for p >= 0, but restated).

    Split layout [sin | cos], w_i = 10000^(-i/(half_dim - 1)), half_dim = d // 2.
    Odd d: zero column appended. No guard on the denominator: d in {2, 3} raises
    ZeroDivisionError in fairseq (Python float division by 0) -> ValueError here.
    d = 1 (half_dim = 0) does not raise: the sin/cos part is empty and the table
    is the single zero pad column.

    float32: ``-emb`` rounded to float32, float32 arange * it, float32 exp,
    float32 row index * inv, float32 sin/cos.
    """
    half_dim = d // 2
    if half_dim - 1 == 0:
        raise ValueError(
            "fairseq get_embedding divides by half_dim - 1 = 0 "
            "(ZeroDivisionError) for embedding_dim in {2, 3}"
        )
    rows = np.asarray(positions) + padding_idx + 1  # pe_core position -> table row
    r = _pos(rows, float32)
    emb = math.log(10000) / (half_dim - 1)
    if float32:
        emb = _exp(np.arange(half_dim, dtype=np.float32) * np.float32(-emb), True)
    else:
        emb = np.exp(np.arange(half_dim, dtype=np.float64) * -emb)
    emb = r[..., None] * emb
    emb = np.concatenate([_sin(emb, float32), _cos(emb, float32)], axis=-1)
    if d % 2 == 1:
        emb = np.concatenate([emb, np.zeros(r.shape + (1,), emb.dtype)], axis=-1)
    if padding_idx is not None:
        emb[np.asarray(rows) == padding_idx] = 0
    return emb.astype(_dtype(float32))


# ---------------------------------------------------------------------------
# 4. whisper
# ---------------------------------------------------------------------------


def whisper(positions, d, *, float32=False, max_timescale=10000):
    """OpenAI whisper ``sinusoids`` (openai/whisper, whisper/model.py)::

        assert channels % 2 == 0
        log_timescale_increment = np.log(max_timescale) / (channels // 2 - 1)
        inv_timescales = torch.exp(-log_timescale_increment * torch.arange(channels // 2))
        scaled_time = torch.arange(length)[:, np.newaxis] * inv_timescales[np.newaxis, :]
        return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)

    Split layout [sin | cos], w_i = max_timescale^(-i/(d/2 - 1)); no offset
    (used as the audio encoder's fixed ``positional_embedding`` buffer).
    Odd d: AssertionError -> ValueError here.
    d = 2: ``np.log(...) / 0`` is inf (NumPy warning only), -inf * 0 = NaN, so
    the whole table is NaN; restated as NaN.

    float32: the NumPy float64 increment times the int64 arange gives a float32
    tensor with the scalar rounded to float32; float32 exp; int64 position *
    float32 -> float32; float32 sin/cos.
    """
    if d % 2 != 0:
        raise ValueError("whisper sinusoids asserts channels % 2 == 0")
    n = d // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        log_timescale_increment = np.log(max_timescale) / (n - 1)
        if float32:
            inv = _exp(np.float32(-log_timescale_increment) * np.arange(n).astype(np.float32), True)
        else:
            inv = np.exp(-log_timescale_increment * np.arange(n).astype(np.float64))
        p = _pos(positions, float32)
        scaled_time = p[..., None] * inv
        out = np.concatenate([_sin(scaled_time, float32), _cos(scaled_time, float32)], axis=-1)
    return out.astype(_dtype(float32))


# ---------------------------------------------------------------------------
# 5. flax examples
# ---------------------------------------------------------------------------


def flax_sinusoidal_init(positions, d, *, float32=False, min_scale=1.0, max_scale=10000.0):
    """flax examples ``sinusoidal_init`` (google/flax examples/wmt/models.py,
    2024 version; examples/lm1b/models.py has the same function)::

        d_feature = shape[-1]
        pe = np.zeros((max_len, d_feature), dtype=np.float32)
        position = np.arange(0, max_len)[:, np.newaxis]
        scale_factor = -np.log(max_scale / min_scale) / (d_feature // 2 - 1)
        div_term = min_scale * np.exp(np.arange(0, d_feature // 2) * scale_factor)
        pe[:, : d_feature // 2] = np.sin(position * div_term)
        pe[:, d_feature // 2 : 2 * (d_feature // 2)] = np.cos(position * div_term)

    Split layout [sin | cos], w_i = min_scale * (min_scale/max_scale)^(i/(d//2 - 1)).
    Like t2t, ``min_scale`` MULTIPLIES (same as t2t for min_scale = 1).
    Odd d: the last column of the zero-initialised table is never written -> 0
    (same as computing d - 1 and appending a zero column). No offset: row k is
    position k (packed inputs use ``jnp.take(pe[0], inputs_positions)``;
    decoding uses ``cache_index``).
    No guard: d in {2, 3} gives scale_factor = -inf, 0 * -inf = NaN, so NaN
    sin/cos columns; d = 1 gives an all-zero column. Restated as is.

    (Earlier flax examples, before the linen rewrite settled, used the Vaswani
    form ``np.exp(np.arange(0, d_feature, 2) * -(np.log(10000.0) / d_feature))``
    with ``pe[:, 0::2] = sin``, ``pe[:, 1::2] = cos``; the current wmt/lm1b code
    is the split i/(d/2-1) form restated here.)

    float32: NumPy computes everything in float64 (int positions * float64
    div_term) and the assignment into the float32 ``pe`` rounds once.
    """
    half = d // 2
    p = np.asarray(positions).astype(np.float64)
    pe = np.zeros(p.shape + (d,), dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale_factor = -np.log(max_scale / min_scale) / (half - 1)
        div_term = min_scale * np.exp(np.arange(0, half) * scale_factor)
        angle = p[..., None] * div_term
        pe[..., :half] = np.sin(angle)
        pe[..., half : 2 * half] = np.cos(angle)
    return pe.astype(np.float32) if float32 else pe


# ---------------------------------------------------------------------------
# 6. keras-hub / keras_nlp
# ---------------------------------------------------------------------------


def keras_hub_sine(positions, d, *, float32=False, max_wavelength=10000):
    """keras-hub ``SinePositionEncoding`` (keras-team/keras-hub,
    keras_hub/src/layers/modeling/sine_position_encoding.py; same code as
    keras_nlp ``SinePositionEncoding``)::

        positions = ops.arange(seq_length)
        positions = ops.cast(positions + start_index, self.compute_dtype)
        min_freq = ops.cast(1 / self.max_wavelength, dtype=self.compute_dtype)
        timescales = ops.power(
            min_freq,
            ops.cast(2 * (ops.arange(hidden_size) // 2), self.compute_dtype)
            / ops.cast(hidden_size, self.compute_dtype),
        )
        angles = ops.expand_dims(positions, 1) * ops.expand_dims(timescales, 0)
        cos_mask = ops.cast(ops.arange(hidden_size) % 2, self.compute_dtype)
        sin_mask = 1 - cos_mask
        positional_encodings = ops.sin(angles) * sin_mask + ops.cos(angles) * cos_mask

    Interleaved [sin w0, cos w0, sin w1, ...] via masks, with per-channel
    frequency (1/max_wavelength)^(2*(k//2)/d) = 10000^(-2i/d).
    ``start_index`` is an offset: output row k is position k + start_index
    (newer versions also accept explicit ``positions``); pass positions directly.

    Odd d: no error; channel d-1 (even) is sin with w = 10000^(-(d-1)/d), i.e.
    the interleaved d-formula with the ODD d as denominator, last cos dropped.
    This is neither "raise" nor "zero_pad".

    float32 (compute_dtype float32): positions, min_freq = float32(1e-4) and
    the exponent (float32 division) are float32; float32 pow; float32 angles;
    float32 sin/cos; masks multiply by exactly 0/1.
    """
    k = np.arange(d)
    p = _pos(positions, float32)
    if float32:
        min_freq = np.float32(1 / max_wavelength)
        expo = (2 * (k // 2)).astype(np.float32) / np.float32(d)
        timescales = _f32_pow(min_freq, expo)
        cos_mask = (k % 2).astype(np.float32)
        sin_mask = np.float32(1) - cos_mask
    else:
        min_freq = 1 / max_wavelength
        expo = (2 * (k // 2)).astype(np.float64) / float(d)
        timescales = np.power(min_freq, expo)
        cos_mask = (k % 2).astype(np.float64)
        sin_mask = 1.0 - cos_mask
    angles = p[..., None] * timescales
    out = _sin(angles, float32) * sin_mask + _cos(angles, float32) * cos_mask
    return out.astype(_dtype(float32))


# ---------------------------------------------------------------------------
# 7. DistilBERT
# ---------------------------------------------------------------------------


def distilbert(positions, d, *, float32=False):
    """Hugging Face DistilBERT ``create_sinusoidal_embeddings``
    (huggingface/transformers,
    src/transformers/models/distilbert/modeling_distilbert.py)::

        position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim)
                                  for j in range(dim)] for pos in range(n_pos)])
        out[:, 0::2] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
        out[:, 1::2] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))

    Interleaved; angle = pos / 10000^(2*(j//2)/d) (DIVISION by the power,
    not multiplication by an exp). Row k = position k (``position_ids`` = arange).
    Used only when ``config.sinusoidal_pos_embds`` is True.

    Odd d: no error; the last (even) column is sin(pos / 10000^((d-1)/d)):
    interleaved d-formula with the ODD d as denominator, last cos dropped
    (same as keras-hub).

    float32: all math in float64 NumPy; ``torch.FloatTensor`` rounds once.
    """
    j = np.arange(d)
    p = np.asarray(positions).astype(np.float64)
    position_enc = p[..., None] / np.power(10000, 2 * (j // 2) / d)
    out = np.zeros(p.shape + (d,), dtype=np.float64)
    out[..., 0::2] = np.sin(position_enc[..., 0::2])
    out[..., 1::2] = np.cos(position_enc[..., 1::2])
    return out.astype(np.float32) if float32 else out


# ---------------------------------------------------------------------------
# 8. PyPI positional-encodings
# ---------------------------------------------------------------------------


def positional_encodings_1d(positions, d, *, float32=False):
    """PyPI ``positional-encodings`` ``PositionalEncoding1D``
    (tatp22/multidim-positional-encoding, positional_encodings/torch_encodings.py)::

        def get_emb(sin_inp):
            emb = torch.stack((sin_inp.sin(), sin_inp.cos()), dim=-1)
            return torch.flatten(emb, -2, -1)
        ...
        self.org_channels = channels
        channels = int(np.ceil(channels / 2) * 2)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, channels, 2).float() / channels))
        ...
        pos_x = torch.arange(x, device=tensor.device, dtype=self.inv_freq.dtype)
        sin_inp_x = torch.einsum("i,j->ij", pos_x, self.inv_freq)
        emb_x = get_emb(sin_inp_x)
        emb = torch.zeros((x, self.channels), ...); emb[:, : self.channels] = emb_x
        return emb[None, :, :orig_ch]

    Interleaved (stack then flatten), w_i = 1 / 10000^(2i/C). Row k = position k.

    Odd d: C = d rounded UP to even (d + 1) is used both for the number of
    frequencies and as the exponent denominator (w_i = 10000^(-2i/(d+1))),
    then the output is truncated to d channels (last cos dropped). This differs
    from keras-hub/DistilBERT, which use the odd d itself as denominator.

    float32: inv_freq in float32 (float32 exponent 2i/C, float32 pow,
    float32 reciprocal), float32 positions, float32 products, float32 sin/cos.
    (The output dtype follows the input tensor, but the values are float32-computed.)
    """
    ch = int(np.ceil(d / 2) * 2)
    p = _pos(positions, float32)
    if float32:
        expo = np.arange(0, ch, 2).astype(np.float32) / np.float32(ch)
        inv_freq = np.float32(1.0) / _f32_pow(10000, expo)
    else:
        expo = np.arange(0, ch, 2).astype(np.float64) / ch
        inv_freq = 1.0 / (10000.0**expo)
    sin_inp = p[..., None] * inv_freq
    emb = np.stack((_sin(sin_inp, float32), _cos(sin_inp, float32)), axis=-1)
    emb = emb.reshape(p.shape + (ch,))
    return emb[..., :d].astype(_dtype(float32))


def musicgen(positions, d, *, float32=False):
    """transformers ``MusicgenSinusoidalPositionalEmbedding.get_embedding``
    (huggingface/transformers, models/musicgen/modeling_musicgen.py)::

        half_dim = embedding_dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, dtype=torch.int64).float() * -emb)
        emb = torch.arange(num_embeddings, dtype=torch.int64).float().unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.cos(emb), torch.sin(emb)], dim=1).view(num_embeddings, -1)
        if embedding_dim % 2 == 1:
            emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)

    Split layout, the cosines first: [cos | sin], w_i = 10000^(-i/(d/2 - 1)), a zero
    column for odd d. d = 2, 3: ``/ 0`` raises ZeroDivisionError (restated).

    float32: the Python float ``-emb`` rounded to float32 times the float32 arange,
    float32 exp, float32 positions and products, float32 sin/cos.
    """
    half_dim = d // 2
    emb = math.log(10000) / (half_dim - 1)
    if float32:
        inv = _exp(np.arange(half_dim).astype(np.float32) * np.float32(-emb), True)
    else:
        inv = np.exp(np.arange(half_dim).astype(np.float64) * -emb)
    p = _pos(positions, float32)
    angles = p[..., None] * inv
    out = np.concatenate([_cos(angles, float32), _sin(angles, float32)], axis=-1)
    if d % 2 == 1:
        out = np.concatenate([out, np.zeros(out.shape[:-1] + (1,))], axis=-1)
    return out.astype(_dtype(float32))


def diffusers_timestep_flipped(positions, d, *, float32=False, max_period=10000):
    """diffusers ``get_timestep_embedding`` with ``flip_sin_to_cos=True``,
    ``downscale_freq_shift=0``, ``scale=1`` (huggingface/diffusers,
    src/diffusers/models/embeddings.py)::

        half_dim = embedding_dim // 2
        exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32)
        exponent = exponent / (half_dim - downscale_freq_shift)
        emb = torch.exp(exponent)
        emb = timesteps[:, None].float() * emb[None, :]
        emb = scale * emb
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
        if flip_sin_to_cos:
            emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
        if embedding_dim % 2 == 1:
            emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))

    [cos | sin], w_i = max_period^(-i/(d//2)) (2i/d for even d), a zero column for odd d.

    float32: the float32 arange times the Python float ``-log(max_period)`` (rounded to
    float32), float32 division, exp, products and sin/cos.
    """
    half_dim = d // 2
    if float32:
        exponent = np.float32(-math.log(max_period)) * np.arange(half_dim).astype(np.float32)
        inv = _exp(exponent / np.float32(half_dim), True)
    else:
        inv = np.exp(-math.log(max_period) * np.arange(half_dim).astype(np.float64) / half_dim)
    p = _pos(positions, float32)
    angles = p[..., None] * inv
    out = np.concatenate([_sin(angles, float32), _cos(angles, float32)], axis=-1)
    out = np.concatenate([out[..., half_dim:], out[..., :half_dim]], axis=-1)
    if d % 2 == 1:
        out = np.concatenate([out, np.zeros(out.shape[:-1] + (1,))], axis=-1)
    return out.astype(_dtype(float32))


# ---------------------------------------------------------------------------
# registries
# ---------------------------------------------------------------------------

REFERENCES = {
    "textbook_torch": textbook_torch,
    "tensor2tensor": tensor2tensor,
    "fairseq": fairseq,
    "whisper": whisper,
    "flax_sinusoidal_init": flax_sinusoidal_init,
    "keras_hub_sine": keras_hub_sine,
    "distilbert": distilbert,
    "positional_encodings_1d": positional_encodings_1d,
    "musicgen": musicgen,
    "diffusers_timestep_flipped": diffusers_timestep_flipped,
}

# Which pe_core preset each reference should match (for even d, default
# keyword arguments, d >= 4; see each docstring for odd d, small d and
# min_timescale != 1).
PRESET_OF = {
    "textbook_torch": "vaswani",
    "keras_hub_sine": "vaswani",
    "distilbert": "vaswani",
    "positional_encodings_1d": "positional_encodings_1d",
    "tensor2tensor": "tensor2tensor",
    "fairseq": "fairseq",
    "whisper": "whisper",
    "flax_sinusoidal_init": "flax",
    "musicgen": "musicgen",
    "diffusers_timestep_flipped": "diffusers_flip_sin_to_cos",
}
