"""renderer.rules: the module that names every format and render rule, its old import path, and the
rules a frame's trace records."""

from __future__ import annotations

from renderer import rules


def test_the_old_module_path_re_exports_the_rules():
    from renderer.formats import options

    for name in ("NODE_FLAG_DONT_INHERIT_ROTATION", "GEOA_STATIC_COLOR_BGR", "LIGHTING_RULES", "DEFAULT_LIGHTING",
                 "TEXTURE_MIPMAPS", "HD_SLOTS", "RENDER_RULE", "PRE2_SQUIRT"):
        assert getattr(options, name) is getattr(rules, name)


def test_the_render_rule_names_each_fixed_rule():
    assert rules.RENDER_RULE.startswith("render-v2: ")
    for part in ("mipmaps stored", "GEOA static RGB", "KGAC BGR", "HD slots diffuse/normal/orm/emissive/team_color/"
                 "environment"):
        assert part in rules.RENDER_RULE


def test_every_lighting_rule_describes_itself_by_name():
    for name, rule in rules.LIGHTING_RULES.items():
        assert rule.name == name and rule.describe().startswith(f"{name}: ")
    assert rules.lighting_rule(rules.DEFAULT_LIGHTING) is rules.LIGHTING_VIEWER
