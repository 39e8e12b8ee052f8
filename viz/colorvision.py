"""Colour-vision simulation and perceptual distance, to check the palette in ``viz.theme``.

Simulation: Machado, Oliveira & Fernandes (2009), "A physiologically-based model for simulation
of color vision deficiency", severity 1.0 matrices, applied to linear-light sRGB (the paper's
convention). Distance: CIE76 ΔE in CIELAB (D65). Pure Python, no dependencies.
"""

from __future__ import annotations

import math

Matrix = tuple[tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]]

#: Machado et al. 2009, severity 1.0 (full dichromacy).
DEFICIENCIES: dict[str, Matrix] = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}

RGB = tuple[float, float, float]


def hex_to_rgb(color: str) -> RGB:
    """``#rrggbb`` -> (r, g, b) in 0..1."""
    value = color.lstrip("#")
    if len(value) != 6:
        raise ValueError(f"expected #rrggbb, got {color!r}")
    return (int(value[0:2], 16) / 255, int(value[2:4], 16) / 255, int(value[4:6], 16) / 255)


def _to_linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _to_srgb(c: float) -> float:
    c = min(1.0, max(0.0, c))
    return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055


def simulate(color: str, deficiency: str) -> RGB:
    """How ``color`` looks to a dichromat (sRGB 0..1). ``deficiency``: a key of DEFICIENCIES."""
    m = DEFICIENCIES[deficiency]
    lin = [_to_linear(c) for c in hex_to_rgb(color)]
    out = [sum(m[i][j] * lin[j] for j in range(3)) for i in range(3)]
    return (_to_srgb(out[0]), _to_srgb(out[1]), _to_srgb(out[2]))


def rgb_to_lab(rgb: RGB) -> tuple[float, float, float]:
    """sRGB (0..1) -> CIELAB, D65 white."""
    r, g, b = (_to_linear(c) for c in rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))


def delta_e(a: RGB, b: RGB) -> float:
    """CIE76 colour difference (about 2.3 is "just noticeable"; 20+ reads as different at a glance)."""
    return math.dist(rgb_to_lab(a), rgb_to_lab(b))


def min_distance(colors: dict[str, str], deficiency: str | None = None) -> tuple[float, str, str]:
    """The closest pair of ``colors`` (as seen with ``deficiency``, or normal vision): (ΔE, name, name)."""
    seen = {name: simulate(c, deficiency) if deficiency else hex_to_rgb(c) for name, c in colors.items()}
    names = list(seen)
    best = (math.inf, "", "")
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            d = delta_e(seen[a], seen[b])
            if d < best[0]:
                best = (d, a, b)
    return best
