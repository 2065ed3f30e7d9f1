"""Team colours (replaceable ID 1) and team glows (replaceable ID 2), generated instead of loaded.

`TEAM_COLORS` is the game's player-colour table: the classic 16 first (0-15), then the Reforged
additions (16-23, `PLAYER_COLOR_WHEAT` .. `PLAYER_COLOR_PEANUT` in common.j), then the four
neutral slots 24-27 of the 28-slot Reforged game.

Sources: indices 0-23 are the RGB values of the in-game colour codes, which many public map
scripts agree on (e.g. `|cffff0303` red ... `|cffa46f33` peanut) and whose order matches the
common.j constants ConvertPlayerColor(0..23). Those scripts also write yellow as fffc01 and brown
as 4a2a04 now and then; we keep 255,252,0 and 78,42,4. Indices 24-27 are UNCERTAIN: common.j
names no colour for them and the game's TeamColor24..27 textures were not available; UI scripts
use TeamColor24 and TeamColor27 as solid black, so all four are black here.
"""

from __future__ import annotations

import operator

import numpy as np

TEAM_COLORS: tuple[tuple[int, int, int], ...] = (
    (255, 3, 3),  # 0 red
    (0, 66, 255),  # 1 blue
    (28, 230, 185),  # 2 teal
    (84, 0, 129),  # 3 purple
    (255, 252, 0),  # 4 yellow
    (254, 138, 14),  # 5 orange
    (32, 192, 0),  # 6 green
    (229, 91, 176),  # 7 pink
    (149, 150, 151),  # 8 gray
    (126, 191, 241),  # 9 light blue
    (16, 98, 70),  # 10 dark green
    (78, 42, 4),  # 11 brown
    (155, 0, 0),  # 12 maroon
    (0, 0, 195),  # 13 navy
    (0, 234, 255),  # 14 turquoise
    (190, 0, 254),  # 15 violet
    (235, 205, 135),  # 16 wheat
    (248, 164, 139),  # 17 peach
    (191, 255, 128),  # 18 mint
    (220, 185, 235),  # 19 lavender
    (40, 40, 40),  # 20 coal
    (235, 240, 255),  # 21 snow
    (0, 120, 30),  # 22 emerald
    (164, 111, 51),  # 23 peanut
    (0, 0, 0),  # 24 neutral (uncertain, see module docstring)
    (0, 0, 0),  # 25 neutral (uncertain)
    (0, 0, 0),  # 26 neutral (uncertain)
    (0, 0, 0),  # 27 neutral (uncertain)
)
TEAM_COLOR_NAMES: tuple[str, ...] = (
    "red", "blue", "teal", "purple", "yellow", "orange", "green", "pink",
    "gray", "light blue", "dark green", "brown", "maroon", "navy", "turquoise", "violet",
    "wheat", "peach", "mint", "lavender", "coal", "snow", "emerald", "peanut",
    "neutral 24", "neutral 25", "neutral 26", "neutral 27",
)  # fmt: skip
CLASSIC_TEAMS = 16
REFORGED_TEAMS = len(TEAM_COLORS)
MAX_GLOW_SIZE = 4096


def team_color(index: int) -> tuple[int, int, int]:
    """RGB of team `index` (0-27); ValueError outside that range."""
    i = operator.index(index)
    if not 0 <= i < REFORGED_TEAMS:
        raise ValueError(
            f"team colour index {i} is out of range: there are {REFORGED_TEAMS} teams, 0 to {REFORGED_TEAMS - 1}"
        )
    return TEAM_COLORS[i]


def team_color_texture(index: int) -> np.ndarray:
    """The team colour as a (1, 1, 4) uint8 RGBA texture, alpha 255."""
    out = np.empty((1, 1, 4), dtype=np.uint8)
    out[0, 0, :3] = team_color(index)
    out[0, 0, 3] = 255
    return out


def team_glow_texture(index: int, size: int = 32) -> np.ndarray:
    """A (size, size, 4) uint8 radial glow: the team colour everywhere, alpha falling off from the
    centre. For the pixel centre (x + 0.5, y + 0.5), r = distance to (size / 2, size / 2) divided
    by size / 2, and alpha = round(255 * (1 - r)^2) for r < 1, else 0. RGB is the full colour even
    where alpha is 0, so filtering at the edge does not darken the glow."""
    rgb = team_color(index)
    n = operator.index(size)
    if not 1 <= n <= MAX_GLOW_SIZE:
        raise ValueError(f"glow size {n} is out of range 1 to {MAX_GLOW_SIZE}")
    centre = n / 2.0
    coords = np.arange(n, dtype=np.float64) + 0.5 - centre
    r = np.hypot(coords[None, :], coords[:, None]) / centre
    falloff = np.clip(1.0 - r, 0.0, 1.0) ** 2
    out = np.empty((n, n, 4), dtype=np.uint8)
    out[..., :3] = rgb
    out[..., 3] = np.rint(255.0 * falloff).astype(np.uint8)
    return out
