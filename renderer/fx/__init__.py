"""Particles (PRE2, PREM) and ribbon trails (RIBB): deterministic fixed-step simulators.

    from renderer.fx import Effects
    effects = Effects()                       # one per Renderer: compiled models + running simulations
    sim = effects.at(model, animator, sequence_index, t_ms, instance_seed, model_hash, view)

Modules: `simulation` (the fixed step, the per-renderer cache, the rule recorded in traces),
`window` (the time window rule: the state at t depends only on a bounded window before t, so any
timestamp up to 2^53 ms costs the same), `rng` (counter-based generators keyed by step), `pre2`,
`prem`, `ribbons` (per-kind rules), `trail` (the engine-level trail, no MDX), `params` (emitter
tracks sampled together), `buffer` (struct-of-arrays particles), `draw` (the frame's effects pass;
GL programs live in `renderer.gl.particles`).

Disputed choices are named in `renderer.rules` (PRE2_EMISSION_RATE_SCALE, PRE2_SQUIRT,
PRE2_ATLAS_END, PRE2_DIRECTION, PREM_ANGLES, PREM_TGA_HALF_SIZE, RIBBON_EMISSION_RATE_SCALE) and
recorded in every frame's trace through `FX_RULE`.
"""

from renderer.fx.simulation import FX_RULE, CompiledEffects, Effects, Simulation
from renderer.fx.trail import ACCUMULATOR_CLAMP, STALE_MS, Strip, Trail
from renderer.fx.window import STEP_MS

__all__ = ["ACCUMULATOR_CLAMP", "FX_RULE", "STALE_MS", "STEP_MS", "CompiledEffects", "Effects", "Simulation",
           "Strip", "Trail"]
