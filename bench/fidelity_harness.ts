// bench/fidelity.py's page script: renders one frame of one model with mdx-m3-viewer (bundled from
// its source in a scratch folder, never committed) and leaves a PNG data URL in window.FIDELITY.
// window.JOB: {model, size, eye, target, up, fov_deg, near, far, sequence, time_ms, background,
// step_ms}. With step_ms, time advances from the sequence start in steps of step_ms (the viewer's own
// 1000/60 ms frames), so emitters simulate as they do in the viewer; FIDELITY.alive counts the live
// particles and ribbon edges then.
import { alive, openModel } from './viewer_page';

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
  viewer.update(0);
  if (job.step_ms) {
    instance.frame = model.sequences[job.sequence]?.interval[0] ?? 0;
    for (let t = 0; t < job.time_ms; t += job.step_ms) {  // the viewer's own loop: update, then draw
      viewer.update(Math.min(job.step_ms, job.time_ms - t));
      viewer.startFrame();
      viewer.render();
    }
  } else {
    instance.frame = (model.sequences[job.sequence]?.interval[0] ?? 0) + job.time_ms;
    viewer.update(0);
  }
  const live = alive(instance);
  viewer.startFrame();
  viewer.render();
  window.FIDELITY = { png: canvas.toDataURL('image/png'), alive: live };
}

run().catch((e) => { window.FIDELITY = { error: String(e && e.stack || e) }; });
