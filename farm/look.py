"""The default look at a model: the time and camera `farm render`, `farm view` and `farm thumbnails`
use when they are not told (one rule, imported by all three, restated nowhere), and the sentence
they print when that frame, or any other, is blank.

* Camera: `DEFAULT_CAMERA`, the renderer's ``fit`` rule (renderer.camera.FIT_RULE): the auto
  camera's view around what the frame draws (posed geometry, live particles and ribbons), so a
  MODL extent smaller than the posed model does not clip it and a particle effect is not left tiny.
  Jobs (manifests) keep ``auto`` as their default: their trace keys and goldens keep their meaning.
* Time: `default_time`, the middle of the chosen sequence: particles and ribbons that have not
  spawned at its start are alive, and a still model shows the same pose as at 0; 0 without a
  sequence. (Which sequence is each command's: `farm render` and `farm view` the first,
  thumbnails Portrait, else Stand, else the first: farm.thumbs.work.choose_sequence.)
* An explicit ``--time`` or ``--camera`` always wins (`frame_defaults`). Several frames of one
  sequence (`farm render --times/--every`) keep ``auto``, as before: they share one camera, where
  ``fit`` would frame each pose anew and the frames would not line up.
* A blank frame (farm.images.blank_reason) is never silent: `blank_warning` is the one sentence,
  naming the model, the sequence and time, and the ``--time`` / ``--sequence`` to try.
"""

from __future__ import annotations

from renderer.camera import AUTO_CAMERA, FIT_CAMERA

__all__ = ["CAMERA_HELP", "DEFAULT_CAMERA", "MAX_LISTED_SEQUENCES", "blank_warning", "default_time", "frame_camera",
           "frame_defaults", "sequence_length"]

DEFAULT_CAMERA = FIT_CAMERA
CAMERA_HELP = ("fit (the default for one frame: frames what it draws) | auto (the model's declared extent: the"
               " default of jobs and of --times/--every) | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]")
MAX_LISTED_SEQUENCES = 8  # a blank-frame warning lists the model's sequences when it has at most this many


def sequence_length(model, seq: int | None) -> int:
    """How long sequence `seq` of `model` lasts, in whole ms (0 without a sequence, or for an interval
    that ends before it starts): what the default time, `--every`, the view's scrubbing and the
    animation frames are measured on."""
    if seq is None:
        return 0
    start, end = model.sequences[seq].interval
    return max(int(end) - int(start), 0)


def default_time(model, seq: int | None) -> int:
    """The middle of the sequence, in ms from its start (0 without a sequence)."""
    return sequence_length(model, seq) // 2


def frame_defaults(model, seq: int | None, time_ms: int | None = None, camera: str | None = None,
                   several: bool = False) -> tuple[int, str]:
    """(time, camera) of a frame of `model` at sequence `seq`: the ones asked for, else the default look
    (`several`: frames of one sequence that share a camera, module docstring)."""
    default = AUTO_CAMERA if several else DEFAULT_CAMERA
    return (default_time(model, seq) if time_ms is None else int(time_ms), default if camera is None else camera)


def frame_camera(renderer, model, spec, context=None) -> tuple[tuple, tuple]:
    """(eye, target) of the camera `renderer` resolves for `spec` (the model in `context`,
    renderer.context): a ``fit`` camera depends on the frame's pose and effects, so it is read from the
    frame's trace (`farm view` starts its orbit there)."""
    cam = renderer.render(model, spec, context=context).trace["camera"]
    return tuple(cam["eye"]), tuple(cam["target"])


def blank_warning(name: str, model, seq: int | None, time_ms: int, reason: str, path: str | None = None) -> str:
    """One sentence for a blank frame: the model (`name`; `path`, when it differs, is what `farm inspect`
    takes), the sequence and time, why, and what to try."""
    inspect = f"farm inspect {path or name}"
    if seq is None:
        return (f"{name}: the frame at {time_ms} ms (no sequence: the bind pose) is blank ({reason}); the model has"
                f" no sequences, so no --time or --sequence draws more: {inspect} shows what it holds")
    seq_name = str(model.sequences[seq].name)
    middle = default_time(model, seq)
    if time_ms != middle:
        time_hint = f"--time {middle} (the middle of {seq_name!r})"
    else:
        time_hint = f"another --time (0..{sequence_length(model, seq)} ms of {seq_name!r})"
    others = [str(s.name) for i, s in enumerate(model.sequences) if i != seq]
    if not others:
        seq_hint = ""
    elif len(model.sequences) <= MAX_LISTED_SEQUENCES:
        seq_hint = f" or another --sequence ({', '.join(others)})"
    else:
        seq_hint = f" or another --sequence ({len(model.sequences)} sequences: {inspect} lists them)"
    return (f"{name}: the frame at {time_ms} ms of sequence {seq} {seq_name!r} is blank ({reason}): nothing is drawn"
            f" then; try {time_hint}{seq_hint}")
