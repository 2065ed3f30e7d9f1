// bench/fidelity.py's page script: renders one frame of one model with mdx-m3-viewer (bundled from
// its source in a scratch folder, never committed) and leaves a PNG data URL in window.FIDELITY.
// window.FIDELITY_JOB: {model, size, eye, target, up, fov_deg, near, far, sequence, time_ms, background,
// step_ms}. With step_ms, time advances from the sequence start in steps of step_ms (the viewer's own
// 1000/60 ms frames), so emitters simulate as they do in the viewer; FIDELITY.alive counts the live
// particles and ribbon edges then.
import ModelViewer from './viewer/src/viewer/viewer';
import mdxHandler from './viewer/src/viewer/handlers/mdx/handler';
import blpHandler from './viewer/src/viewer/handlers/blp/handler';
import tgaHandler from './viewer/src/viewer/handlers/tga/handler';
import ddsHandler from './viewer/src/viewer/handlers/dds/handler';

declare global {
  interface Window { FIDELITY_JOB: any; FIDELITY: any; }
}

async function run(): Promise<void> {
  const job = window.FIDELITY_JOB;
  const canvas = document.createElement('canvas');
  canvas.width = job.size;
  canvas.height = job.size;
  document.body.appendChild(canvas);
  const viewer = new ModelViewer(canvas, { preserveDrawingBuffer: true, alpha: false, antialias: false });
  viewer.on('error', () => undefined);  // missing files (team colours): the viewer draws without them
  const base = job.model.substring(0, job.model.lastIndexOf('/') + 1);
  const solver = (src: unknown) => (typeof src === 'string' && !src.startsWith('/') && !src.includes('://'))
    ? base + src.replace(/\\/g, '/') : src;
  viewer.addHandler(mdxHandler, solver);
  viewer.addHandler(blpHandler);
  viewer.addHandler(tgaHandler);
  viewer.addHandler(ddsHandler);
  const scene = viewer.addScene();
  scene.color.set(job.background);
  scene.camera.perspective(job.fov_deg * Math.PI / 180, 1, job.near, job.far);
  scene.camera.moveToAndFace(job.eye, job.target, job.up);
  const model: any = await viewer.load(job.model.substring(base.length), solver);
  if (!model) {
    window.FIDELITY = { error: 'the viewer could not load the model' };
    return;
  }
  const instance = model.addInstance();
  instance.setScene(scene);
  instance.setSequence(job.sequence);
  instance.setSequenceLoopMode(2);
  await viewer.whenAllLoaded();
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
  const count = (list: any[]) => list.reduce((n, e) => n + (e.alive || 0), 0);
  const alive = { particles: count(instance.particleEmitters2 || []) + count(instance.particleEmitters || []),
                  ribbons: count(instance.ribbonEmitters || []) };
  viewer.startFrame();
  viewer.render();
  window.FIDELITY = { png: canvas.toDataURL('image/png'), alive };
}

run().catch((e) => { window.FIDELITY = { error: String(e && e.stack || e) }; });
