"""Goldens: the approved (and rejected) images of each trace. index (the index file, lookups,
environments), decisions (approve, reject, undo, stale, prune)."""

from farm.goldens.decisions import (
    DECISIONS,
    Candidate,
    StaleReport,
    approve,
    decision_states,
    prune,
    redo,
    redo_target,
    reject,
    run_candidates,
    select_traces,
    stale,
    undo,
    undo_target,
)
from farm.goldens.index import (
    FORMAT,
    GENERIC,
    IMAGES_DIR,
    INDEX_NAME,
    LOG_NAME,
    GoldenError,
    GoldenIndex,
    Lookup,
    canonical_entry,
    default_user,
    entry_line,
    env_key,
    find_goldens,
    locked,
    now,
    png_pixel_digest,
)

__all__ = ["DECISIONS", "FORMAT", "GENERIC", "IMAGES_DIR", "INDEX_NAME", "LOG_NAME", "Candidate", "GoldenError",
           "GoldenIndex", "Lookup", "StaleReport", "approve", "canonical_entry", "decision_states", "default_user",
           "entry_line", "env_key", "find_goldens", "locked", "now", "png_pixel_digest", "prune", "redo",
           "redo_target", "reject", "run_candidates", "select_traces", "stale", "undo", "undo_target"]
