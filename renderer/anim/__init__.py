"""CPU side of animation: track sampling, node hierarchy, skinning palettes, poses.

    from renderer.anim import Animator, pose_at
    pose = Animator(model).pose("Stand", 250, view)   # sequence by index or name, t in ms from its start

Modules: `tracks` (sampling, the time rule), `skeleton` (node world matrices, billboards),
`skinning` (palettes and the CPU reference), `pose` (everything a frame needs).
"""

from renderer.anim.pose import (
    GEOSET_HIDDEN_ALPHA,
    Animator,
    Pose,
    UnknownSequence,
    find_sequence,
    pose_at,
)
from renderer.anim.skeleton import DEFAULT_VIEW, Skeleton, look_at
from renderer.anim.skinning import skin_vertices
from renderer.anim.tracks import TIME_RULE, Clock, make_clock, sample_track, value

__all__ = [
    "DEFAULT_VIEW", "GEOSET_HIDDEN_ALPHA", "TIME_RULE", "Animator", "Clock", "Pose", "Skeleton", "UnknownSequence",
    "find_sequence", "look_at", "make_clock", "pose_at", "sample_track", "skin_vertices", "value",
]
