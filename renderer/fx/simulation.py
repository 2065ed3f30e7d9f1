"""Fixed-step simulation of every effect of one model instance, and the per-renderer cache of them.

Time: a simulation plays one sequence (or none) of one model instance and runs in fixed steps of
`STEP_MS` on the grid k x STEP_MS (t = 0 is the sequence start, which is also the global-sequence
origin under the time rule: global time = t mod D). It starts, empty, at the window start of the
first timestamp asked of it (`renderer.fx.window`: t minus the longest lifetime of the model's
emitters, rounded down to the grid, at least 0) and steps up to the requested timestamp: full steps
to the last grid point at or before t, then one shorter step to t itself, taken on a copy of the
state so the stored state stays on the grid. Nothing a step does depends on earlier steps
(emission counts and random draws are functions of the step's times and index), and everything
born before the window start is dead at t, so the state at t depends only on (model content hash,
sequence, instance seed, t), never on which timestamps were rendered before or where the
simulation started: a batch of timestamps continues one stored simulation while the next
timestamp is ahead of it and its window start is not past it, and otherwise starts a fresh one at
that timestamp's window start; either way the bytes are those of separate renders, and a frame at
any t costs at most the window's steps. Models whose nodes follow the camera (billboards, camera
anchors) also key their simulations by the view matrix.

Each step (prev, t] samples every track at the step's clock (the animation module's time rule),
computes the world matrices of the emitters' nodes (only those and their ancestors,
`renderer.anim.pose.NodeSubset`: bit for bit the rows of a full pose, without posing the other nodes
of a 100,000-node model every step), then steps the emitters in file order: PREM, PRE2, RIBB. See
`pre2`, `prem`, `ribbons` and `trail` for the per-kind rules, `window` for the window rule and
`rng` for the generators.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from renderer import rules
from renderer.anim.tracks import check_time, make_clock
from renderer.fx import pre2, prem, ribbons
from renderer.fx.params import ParamTable
from renderer.fx.rng import SEED_RULE, emitter_seed
from renderer.fx.window import MAX_LIFETIME_MS, STEP_MS, grid_index, window_start
from renderer.model import Model

VIEW_FLAGS = 0x8 | 0x10 | 0x20 | 0x40 | 0x80  # billboarded, locked billboards, camera anchored

FX_RULE = (f"fx-v2: fixed {STEP_MS} ms steps from the window start max(0, floor((t - W) / {STEP_MS})) x {STEP_MS}, "
           f"W = the longest lifetime (<= {MAX_LIFETIME_MS:g} ms), last partial step to t; emissions per step "
           f"floor(r t) - floor(r prev); per-step caps; {SEED_RULE}; "
           f"PRE2 rate x{rules.PRE2_EMISSION_RATE_SCALE:g}; squirt={rules.PRE2_SQUIRT}; "
           f"atlas end {rules.PRE2_ATLAS_END}; ribbon rate x{rules.RIBBON_EMISSION_RATE_SCALE:g}")


def _global_driven(record, tags, global_sequences) -> bool:
    """Whether the emitter's rate or visibility runs on a global sequence (it then keeps emitting
    past the end of a non-looping sequence)."""
    for tag in tags:
        track = record.tracks.get(tag)
        if track is not None and 0 <= int(track.global_sequence_id) < len(global_sequences):
            return True
    return False


class CompiledEffects:
    """A model's emitters compiled once: static specs plus one property table per kind."""

    def __init__(self, model: Model, animator):
        self.model = model
        sk = animator.skeleton
        gs = tuple(int(d) for d in model.global_sequences)
        self.notes: list[str] = []

        def node_row(kind, i, record) -> int | None:
            """The emitter's skeleton row, None when its object id is not its own."""
            oid = int(record.object_id)
            row = sk.index.get(oid)
            if row is not None and sk.nodes[row] is record:
                return row
            self.notes.append(f"{kind} {i} ({record.name!r}): its object id {oid} names no node of its own; "
                              f"not simulated")
            return None

        self.pre2_table = ParamTable(pre2.TAGS, gs)
        self.pre2: list[pre2.Pre2Spec] = []
        for i, e in enumerate(model.particle_emitters2):
            if (node := node_row("PRE2", i, e)) is not None:
                row = self.pre2_table.add_row(pre2.statics(e), e.tracks)
                self.pre2.append(pre2.Pre2Spec.build(i, e, node, sk.pivots[node], row))
        self.prem_table = ParamTable(prem.TAGS, gs)
        self.prem: list[prem.PremSpec] = []
        for i, e in enumerate(model.particle_emitters):
            if (node := node_row("PREM", i, e)) is not None:
                row = self.prem_table.add_row(prem.statics(e), e.tracks)
                self.prem.append(prem.PremSpec(i, e, node, sk.pivots[node], row, prem.uses_model(e)))
        self.ribbon_table = ParamTable(ribbons.TAGS, gs)
        self.ribbons: list[ribbons.RibbonSpec] = []
        for i, e in enumerate(model.ribbon_emitters):
            if (node := node_row("RIBB", i, e)) is not None:
                row = self.ribbon_table.add_row(ribbons.statics(e), e.tracks)
                self.ribbons.append(ribbons.RibbonSpec(i, e, node, sk.pivots[node], row,
                                                       max(int(e.rows), 1), max(int(e.columns), 1),
                                                       int(e.material_id)))
        for table in (self.pre2_table, self.prem_table, self.ribbon_table):
            table.freeze()
        self.global_sequences = gs
        lifetimes = [s.lifespan_ms for s in self.pre2] + [s.life_bound_ms for s in self.prem]
        lifetimes += [ribbons.lifetime_ms(s.record) for s in self.ribbons]
        self.window_ms = max(lifetimes, default=0.0)  # the longest any particle or edge lives
        self.view_dependent = bool(np.any(sk.flags & VIEW_FLAGS)) if sk.count else False
        self.empty = not (self.pre2 or self.prem or self.ribbons)
        rows = sorted({s.node for s in (*self.pre2, *self.prem, *self.ribbons)})
        self.nodes = animator.node_subset(rows)  # what each step poses
        self.node_slots = [(r, self.nodes.slot[r]) for r in rows]


class Simulation:
    """The effects of one model instance playing one sequence, stepped on the fixed grid."""

    def __init__(self, fx: CompiledEffects, animator, sequence: int | None, instance_seed: int, model_hash: str,
                 view=None, start_ms: float = 0.0):
        """A fresh simulation whose first step is at `start_ms` (a grid point)."""
        self.fx = fx
        self.model = fx.model
        self.sequence = sequence
        self.instance_seed = int(instance_seed)
        self.model_hash = model_hash
        self.view = None if view is None else np.asarray(view, np.float64)
        seq = None if sequence is None else fx.model.sequences[sequence]
        self._seq = seq
        self._looping = seq is None or not (int(seq.flags) & 1)
        self._duration = 0 if seq is None else max(int(seq.interval[1]) - int(seq.interval[0]), 0)
        gs = fx.global_sequences
        self.pre2 = [pre2.Pre2Emitter(
            s, emitter_seed(model_hash, "PRE2", s.index, instance_seed),
            pre2.squirt_schedule(s.record, seq, gs) if s.squirt else None,
            _global_driven(s.record, ("KP2E", "KP2V"), gs)) for s in fx.pre2]
        self.prem = [prem.PremEmitter(s, emitter_seed(model_hash, "PREM", s.index, instance_seed),
                                      _global_driven(s.record, ("KPEE", "KPEV"), gs)) for s in fx.prem]
        self.ribbons = [ribbons.RibbonState(s, _global_driven(s.record, ("KRVS", "KRAL"), gs)) for s in fx.ribbons]
        self.steps = 0
        self.start_ms = self.t_ms = float(start_ms)
        self._step(animator, self.t_ms, None)

    def playing(self, t_ms: float) -> bool:
        return self._looping or t_ms <= self._duration

    def copy(self) -> Simulation:
        other = Simulation.__new__(Simulation)
        other.__dict__.update(self.__dict__)
        other.pre2 = [e.copy() for e in self.pre2]
        other.prem = [e.copy() for e in self.prem]
        other.ribbons = [r.copy() for r in self.ribbons]
        return other

    def _step(self, animator, t_ms: float, prev_ms: float | None) -> None:
        fx = self.fx
        clock = make_clock(self._seq, t_ms, fx.global_sequences)
        posed = fx.nodes.world_matrices(clock, self.view)
        world = {row: posed[j] for row, j in fx.node_slots}  # the emitters' nodes, by skeleton row
        playing = self.playing(t_ms)
        p_prem = fx.prem_table.sample(clock)
        p_pre2 = fx.pre2_table.sample(clock)
        p_ribb = fx.ribbon_table.sample(clock)
        k = grid_index(t_ms)
        for e in self.prem:
            e.step(t_ms, prev_ms, k, world[e.spec.node], p_prem[e.spec.row], playing)
        for e in self.pre2:
            e.step(t_ms, prev_ms, k, world[e.spec.node], p_pre2[e.spec.row], playing)
        cols = fx.ribbon_table.columns
        for r in self.ribbons:
            r.step(t_ms, world[r.spec.node], p_ribb[r.spec.row], cols, playing)
        self.world = world
        self.params = {"PRE2": p_pre2, "PREM": p_prem, "RIBB": p_ribb}
        self.t_ms = t_ms
        self.steps += 1

    def advance(self, animator, t_ms: float) -> Simulation:
        """The state at t_ms (>= self.t_ms): steps the stored state along the grid and returns it,
        or a copy advanced by one last partial step when t_ms is off the grid."""
        t_ms = float(t_ms)
        if t_ms < self.t_ms:
            raise ValueError(f"simulation is at {self.t_ms} ms; cannot go back to {t_ms} ms")
        k = int(t_ms // STEP_MS)
        done = int(round(self.t_ms / STEP_MS))
        for i in range(done + 1, k + 1):
            self._step(animator, float(i * STEP_MS), self.t_ms)
        if t_ms == self.t_ms:
            return self
        tmp = self.copy()
        tmp._step(animator, t_ms, self.t_ms)
        return tmp


class Effects:
    """Per-renderer cache of compiled effects and running simulations (bounded, least recently used)."""

    def __init__(self, capacity: int = 16):
        self.capacity = capacity
        self._compiled: OrderedDict[int, CompiledEffects] = OrderedDict()
        self._sims: OrderedDict[tuple, Simulation] = OrderedDict()
        self.last_stats: dict = {}
        self.restarts = 0  # fresh simulations started (tests and benches read it)

    def compiled(self, model: Model, animator) -> CompiledEffects:
        fx = self._compiled.get(id(model))
        if fx is None or fx.model is not model:
            fx = CompiledEffects(model, animator)
            self._compiled[id(model)] = fx
        self._compiled.move_to_end(id(model))
        while len(self._compiled) > self.capacity:
            self._compiled.popitem(last=False)
        return fx

    def at(self, model: Model, animator, sequence: int | None, t_ms: float, instance_seed: int, model_hash: str,
           view) -> Simulation | None:
        """The effects of this model instance at t_ms, or None when the model has no emitter.

        The returned state is the stored simulation itself when t_ms is on the step grid: read it
        (draw it) before the next call. t_ms must be 0 .. `renderer.anim.tracks.MAX_TIME_MS`."""
        t_ms = check_time(t_ms)
        self.last_stats = {}
        fx = self.compiled(model, animator)
        if fx.empty:
            return None
        vkey = np.asarray(view, np.float64).tobytes() if fx.view_dependent else None
        key = (id(model), sequence, int(instance_seed), model_hash, vkey)
        sim = self._sims.get(key)
        start = window_start(t_ms, fx.window_ms)
        if sim is None or sim.model is not model or t_ms < sim.t_ms or sim.t_ms < start:
            sim = Simulation(fx, animator, sequence, instance_seed, model_hash, view if fx.view_dependent else None,
                             start)
            self._sims[key] = sim
            self.restarts += 1
        self._sims.move_to_end(key)
        while len(self._sims) > self.capacity:
            self._sims.popitem(last=False)
        return sim.advance(animator, t_ms)

    def forget(self, model: Model) -> None:
        for key in [k for k in self._sims if k[0] == id(model)]:
            del self._sims[key]
        self._compiled.pop(id(model), None)

    def reset(self) -> None:
        """Drop every simulation (the next frame of any model starts a fresh one)."""
        self._sims.clear()
        self._compiled.clear()
