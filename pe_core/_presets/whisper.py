"""The ``whisper`` preset: OpenAI Whisper's audio encoder positions."""

from pe_core._presets import Preset
from pe_core.spec import Spec

PRESET = Preset(
    spec=Spec(denominator="half_minus_one", layout="split", name="whisper"),
    source=("OpenAI whisper model.sinusoids (max_timescale=10000; even channels only)"),
    order=40,
)
