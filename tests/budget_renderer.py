"""A renderer for the budget tests (FARM_RENDERER=budget_renderer:factory): the real GL renderer,
except for models named slow.* (a Python loop that never ends), stuck.* (a call that SIGALRM cannot
interrupt), hog.* (an 8 GiB array) and grow.* (a list that grows forever, one small int at a time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from renderer.frame import Renderer


class BudgetRenderer(Renderer):
    def render(self, model, spec, model_digest=None):
        stem = Path(model.path or "").stem
        if stem == "slow":
            n = 0
            while True:  # stands for a pose or simulation that explodes
                n += 1
        if stem == "stuck":  # stuck inside one call that signals cannot interrupt (a driver, say)
            import signal
            import time

            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        if stem == "hog":
            np.ones(8 << 30, np.uint8)
        if stem == "grow":  # memory that grows in small steps, in a texture decoder (a loop sized by a corrupt count)
            import renderer.texture_set as texture_set

            texture_set.decode_asset_chain = _growing_decoder
        return super().render(model, spec, model_digest)


def _growing_decoder(asset):
    starts = [128]
    for k in range(1, 0xFFFFFFFF):  # what decode_dds_chain did with a mip count of 0xFFFFFFFF
        starts.append(starts[-1] + 8 * max(1, 8 >> k))


def factory():
    return BudgetRenderer("auto")
