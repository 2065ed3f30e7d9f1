"""The effects pose only their emitters' nodes and those nodes' ancestors (`Skeleton.subset`,
`renderer.anim.pose.NodeSubset`), bit for bit the rows of a full pose (issue 23: a 100,000-node model
with one ribbon posed every node at every 20 ms step of the window, minutes per frame)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import corpus_path
from fx_util import fx_model, load, orbit, pre2, ribbon, track

from renderer.anim import Animator
from renderer.anim.skeleton import Skeleton
from renderer.anim.tracks import make_clock
from renderer.camera import look_at
from renderer.formats import load_model
from renderer.fx.simulation import Effects
from renderer.model import Helper, Sequence
from renderer.samples import write_samples

STOCK = "Retera__ReterasModelStudio/matrixeater/res/stock/particles/"
CORPUS = [
    "zengfanfan__war3mdlx/test/!RibbonEmitter.mdx",
    "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Sweep_Fire_Large.mdx",
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/Tornado/WaterTornado.mdx",
    STOCK + "DustEmitter.mdx",
    STOCK + "LargeFireEmitter.mdx",
    STOCK + "TeamcolorWispShimmer.mdx",
    "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx",  # 159 nodes, emitters on few
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/DarionMograineEvil/DarionMograineEvil.mdx",
]
VIEWS = [None, look_at((300.0, -120.0, 80.0), (0.0, 0.0, 40.0)), look_at((-50.0, 400.0, -30.0), (10.0, 5.0, 0.0))]


def emitter_rows(animator: Animator) -> list[int]:
    fx = Effects().compiled(animator.model, animator)
    return sorted({s.node for s in (*fx.pre2, *fx.prem, *fx.ribbons)})


def assert_subset_matches(model, times=range(0, 6000, 37)) -> int:
    """Compares the emitter rows of full and subset poses bit for bit; returns how many were compared."""
    animator = Animator(model)
    rows = emitter_rows(animator)
    assert rows, "the model has no simulated emitter"
    sub = animator.node_subset(rows)
    slots = [sub.slot[r] for r in rows]
    assert sub.skeleton.count <= animator.skeleton.count
    seqs = list(range(len(model.sequences))) or [None]
    compared = 0
    for seq in seqs[:4] + [None]:
        for t in times:
            clock = animator.clock(seq, float(t))
            for view in VIEWS:
                full = animator.node_matrices(clock, view)[rows]
                part = sub.world_matrices(clock, view)[slots]
                assert full.tobytes() == part.tobytes(), (seq, t, view)
                compared += 1
    return compared


def flagged_model(tmp_path):
    """Emitters under chains of every special node flag, beside flagged and animated nodes they do not
    depend on (so each level's flagged group differs between the full and the subset pose)."""
    spin = track("KGRT", [0, 500, 1000], [[0, 0, 0, 1], [0.3, 0.1, 0.6, 0.7], [0, 0, 0, 1]], interpolation=2)
    move = track("KGTR", [0, 700, 1400], [[0, 0, 0], [5, -3, 8], [0, 0, 0]], interpolation=3)
    grow = track("KGSC", [0, 900], [[1, 1, 1], [2, 0.5, 1.5]])
    helpers, pivots = [orbit(1, 1300)], {1: (3, 4, 5)}
    oid = 2
    for flags in (0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x6, 0x8 | 0x1, 0x0):
        for depth in range(2):  # a flagged node under an animated parent, and an animated one under it
            h = Helper(name=f"h{oid}", object_id=oid, parent_id=1 if depth == 0 else oid - 1,
                       flags=flags if depth == 0 else (flags ^ 0x8) & 0xFF)
            h.node_tracks.update({"KGRT": spin, "KGTR": move} if depth else {"KGSC": grow, "KGRT": spin})
            helpers.append(h)
            pivots[oid] = (oid, -oid * 0.5, oid * 0.25)
            oid += 1
    first_emitter = oid
    pre2s = [pre2(first_emitter + i, parent_id=3 + 2 * i) for i in range(0, 10, 2)]
    ribbons = [ribbon(first_emitter + 5 + i, 4 + 2 * i) for i in range(1, 11, 3)]
    for e in (*pre2s, *ribbons):
        pivots[e.object_id] = (1.0, 2.0, float(e.object_id))
    seqs = [Sequence(name="Stand", interval=(0, 1400)), Sequence(name="Walk", interval=(200, 900), flags=1)]
    return load(fx_model(tmp_path, "flagged", pre2s=pre2s, ribbons=ribbons, helpers=helpers, pivots=pivots,
                         sequences=seqs))


def test_subset_rows_are_bit_identical_on_flagged_chains(tmp_path):
    model = flagged_model(tmp_path)
    sk = Skeleton(model)
    assert len(set((sk.flags & 0xFF).tolist())) > 8  # every special flag is there
    assert assert_subset_matches(model, times=range(0, 3000, 13)) > 1000


def test_subset_rows_are_bit_identical_on_the_sample_effects_model(tmp_path):
    write_samples(tmp_path)
    assert_subset_matches(load(tmp_path / "effects.mdx"))


@pytest.mark.parametrize("rel", CORPUS, ids=[c.rsplit("/", 1)[-1] for c in CORPUS])
def test_subset_rows_are_bit_identical_on_corpus_models(rel):
    assert_subset_matches(load_model(corpus_path(rel)), times=range(0, 6000, 91))


@pytest.mark.parametrize("rel", CORPUS[-2:], ids=["Ghost", "DarionMograineEvil"])
def test_track_subsets_sample_bit_identical_rows(rel):
    """Every other track of every group of the bank, sampled alone, at many clocks of every sequence."""
    model = load_model(corpus_path(rel))
    bank = Animator(model).bank
    keep = {g: np.arange(len(s))[1::2] for g, s in bank.sets.items() if len(s) > 1}
    assert sum(len(k) for k in keep.values()) > 20
    sub = bank.subset(keep)
    for seq in [*model.sequences, None]:
        for t in range(0, 5000, 53):
            clock = make_clock(seq, t + 0.25 * (t % 3), model.global_sequences)
            full, part = bank.sample(clock), sub.sample(clock)
            for g, rows in keep.items():
                assert full[g][rows].tobytes() == part[g].tobytes(), (g, seq, t)


def test_subset_keeps_the_rows_asked_for_and_their_ancestors_in_row_order(tmp_path):
    model = flagged_model(tmp_path)
    sk = Skeleton(model)
    # helper 5 under helper 4 under the orbit 1 under the bone 0; asked twice, with its parent
    sub = sk.subset([sk.index[5], sk.index[4], sk.index[5]])
    assert sub.source_rows.tolist() == [sk.index[i] for i in (0, 1, 4, 5)]
    assert sub.ids.tolist() == [0, 1, 4, 5]
    assert sub.parents.tolist() == [4, 0, 1, 2]  # the virtual root is row 4 = count
    assert sub.depth.tolist() == [0, 1, 2, 3]
    assert sk.subset([]).count == 0
    with pytest.raises(ValueError, match="rows must be 0 .. "):
        sk.subset([sk.count])


def test_effects_on_a_big_model_pose_only_the_emitter_chain(tmp_path, monkeypatch):
    """A 3,002-node model whose ribbon hangs two levels down: each effects step poses 3 rows, not 3,002,
    and the ribbon's node matrix is the full pose's."""
    helpers = [Helper(name=f"h{i}", object_id=i, parent_id=0 if i % 7 else i - 1) for i in range(1, 3001)]
    helpers[1].node_tracks["KGRT"] = orbit(2).node_tracks["KGRT"]
    model = load(fx_model(tmp_path, "big", helpers=helpers, ribbons=[ribbon(3001, 2)]))
    animator = Animator(model)
    posed = []
    real = Skeleton.world_matrices

    def spy(self, *a, **kw):
        posed.append(self.count)
        return real(self, *a, **kw)

    monkeypatch.setattr(Skeleton, "world_matrices", spy)
    sim = Effects().at(model, animator, 0, 1500.0, 1, "big", None)
    assert sim.steps > 20 and len(posed) == sim.steps  # the 500 ms window of the ribbon
    assert set(posed) == {3}  # the ribbon (3001), helper 2 and the root bone 0
    monkeypatch.setattr(Skeleton, "world_matrices", real)
    row = animator.skeleton.index[3001]
    full = animator.node_matrices(make_clock(model.sequences[0], 1500.0, model.global_sequences))[row]
    assert sim.world[row].tobytes() == full.tobytes()
