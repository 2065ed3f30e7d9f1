"""Team colour and team glow textures."""

from __future__ import annotations

import numpy as np
import pytest

from renderer.formats.textures import TEAM_COLORS, team_color, team_color_texture, team_glow_texture
from renderer.formats.textures.team import CLASSIC_TEAMS, TEAM_COLOR_NAMES


def test_table_has_28_teams_classic_first():
    assert len(TEAM_COLORS) == len(TEAM_COLOR_NAMES) == 28 and CLASSIC_TEAMS == 16
    assert team_color(0) == (255, 3, 3)  # red
    assert team_color(1) == (0, 66, 255)  # blue
    assert team_color(11) == (78, 42, 4)  # brown
    assert team_color(15) == (190, 0, 254)  # violet
    assert team_color(16) == (235, 205, 135)  # wheat
    assert team_color(18) == (191, 255, 128)  # mint
    assert team_color(19) == (220, 185, 235)  # lavender
    assert team_color(23) == (164, 111, 51)  # peanut
    assert TEAM_COLOR_NAMES[20] == "coal" and team_color(20) == (40, 40, 40)


@pytest.mark.parametrize("index", [0, 4, 12, 27])
def test_team_color_texture_is_solid_and_opaque(index):
    texture = team_color_texture(index)
    assert texture.shape == (1, 1, 4) and texture.dtype == np.uint8
    assert tuple(texture[0, 0]) == (*TEAM_COLORS[index], 255)


@pytest.mark.parametrize("bad", [-1, 28, 100])
def test_index_out_of_range_is_a_clear_value_error(bad):
    with pytest.raises(ValueError, match=rf"team colour index {bad} is out of range.*0 to 27"):
        team_color_texture(bad)
    with pytest.raises(ValueError, match="out of range"):
        team_glow_texture(bad)


def test_glow_centre_edge_and_formula():
    glow = team_glow_texture(1)
    assert glow.shape == (32, 32, 4) and glow.dtype == np.uint8
    assert (glow[..., :3] == TEAM_COLORS[1]).all()
    alpha = glow[..., 3].astype(int)
    # Centre pixels: r = sqrt(0.5^2 + 0.5^2) / 16 -> 255 * (1 - r)^2 = 233.
    assert alpha[15:17, 15:17].tolist() == [[233, 233], [233, 233]]
    assert alpha.max() == 233
    assert alpha[0, 0] == alpha[0, 31] == alpha[31, 0] == alpha[31, 31] == 0  # corners
    assert alpha[0, 15] <= 1 and alpha[15, 0] <= 1  # edge midpoints: r = 15.5 / 16
    np.testing.assert_array_equal(alpha, alpha.T)
    np.testing.assert_array_equal(alpha, alpha[::-1])
    assert (np.diff(alpha[15, 16:]) <= 0).all()  # falls off monotonically
    odd = team_glow_texture(3, size=5)[..., 3]
    assert odd[2, 2] == 255  # odd size: a pixel sits exactly on the centre


def test_glow_is_deterministic_and_size_checked():
    np.testing.assert_array_equal(team_glow_texture(7, 64), team_glow_texture(7, 64))
    with pytest.raises(ValueError, match="glow size"):
        team_glow_texture(0, size=0)
