// bench/fidelity.py's page script: renders one frame of one model with mdx-m3-viewer (bundled from
// its source in a scratch folder, never committed) and leaves a PNG data URL in window.FIDELITY.
// window.JOB: viewer_page.ts's job and time_ms; still frames (SSIM mode) set the instance's frame to the
// sequence start + time_ms and update with a zero step. With `animated`, the instance plays from the
// sequence start (loop mode 0, as ours: loop unless the sequence is NonLooping) and the viewer is
// advanced the way its own particle tests advance it (viewer_page.ts stepLikeTests: seed 6, 1000/60 ms
// updates), so its emitters simulate; `file_rates` undoes its doubling of static emission rates,
// `emitters: false` keeps every emitter from emitting and `seed` replaces the tests' seed 6. FIDELITY then
// also holds the live particles and ribbon edges after the last update (`alive`), the updates taken
// (`steps`) and the instance's frame in ms from the sequence start (`frame_ms`).
import { TEST_SEED, alive, emittersOff, fileRates, openModel, stepLikeTests } from './viewer_page';

declare global {
  interface Window { JOB: any; FIDELITY: any; }
}

async function run(): Promise<void> {
  const job = window.JOB;
  const opened = await openModel(job);
  if (!opened) {
    window.FIDELITY = { error: 'the viewer could not load the model' };
    return;
  }
  const { canvas, viewer, model, instance } = opened;
  const start = model.sequences[job.sequence]?.interval[0] ?? 0;
  let steps = 0;
  if (job.animated) {
    if (job.file_rates) {
      fileRates(model);
    }
    if (job.emitters === false) {
      emittersOff(instance);
    }
    instance.setSequenceLoopMode(0);
    steps = stepLikeTests(viewer, job.time_ms, job.seed ?? TEST_SEED);
  } else {
    viewer.update(0);
    instance.frame = start + job.time_ms;
    viewer.update(0);
    viewer.startFrame();
    viewer.render();
  }
  window.FIDELITY = { png: canvas.toDataURL('image/png'), alive: alive(instance), steps,
                      frame_ms: instance.frame - start };
}

run().catch((e) => { window.FIDELITY = { error: String(e && e.stack || e) }; });
