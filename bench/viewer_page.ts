// The part of bench/*_harness.ts shared by the page scripts that drive mdx-m3-viewer (bundled from its
// source in a scratch folder by bench/viewer.py, never committed): a canvas of job.size, the viewer with
// its MDX/BLP/TGA/DDS handlers, textures asked for relative to the model's URL, one scene with the
// job's background and camera, and one instance of the model on the job's sequence (looping).
// job: {model, size, eye, target, up, fov_deg, near, far, sequence, background}. Also shared: the
// viewer's own particle-test stepping (stepLikeTests), its rates undone (fileRates) and emitters off.
import ModelViewer from './viewer/src/viewer/viewer';
import mdxHandler from './viewer/src/viewer/handlers/mdx/handler';
import blpHandler from './viewer/src/viewer/handlers/blp/handler';
import tgaHandler from './viewer/src/viewer/handlers/tga/handler';
import ddsHandler from './viewer/src/viewer/handlers/dds/handler';
import seededRandom from './viewer/src/common/seededrandom';
import { SETTING_PARTICLES_HIGH } from './viewer/src/viewer/handlers/mdx/geometryemitterfuncs';

export interface Opened { canvas: HTMLCanvasElement; viewer: any; model: any; instance: any; }

export async function openModel(job: any): Promise<Opened | null> {
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
    return null;
  }
  const instance = model.addInstance();
  instance.setScene(scene);
  instance.setSequence(job.sequence);
  instance.setSequenceLoopMode(2);
  await viewer.whenAllLoaded();
  return { canvas, viewer, model, instance };
}

// Live particles (both emitter kinds) and ribbon edges of an instance.
export function alive(instance: any): { particles: number; ribbons: number } {
  const count = (list: any[]) => list.reduce((n, e) => n + (e.alive || 0), 0);
  return { particles: count(instance.particleEmitters2 || []) + count(instance.particleEmitters || []),
           ribbons: count(instance.ribbonEmitters || []) };
}

// The emitters' static rates as the file has them: the viewer multiplies each static PRE2 and ribbon
// emission rate by its "high particles" setting (KP2E / KRER track values are not multiplied).
export function fileRates(model: any): void {
  for (const emitter of [...model.particleEmitters2, ...model.ribbonEmitters]) {
    emitter.emissionRate /= SETTING_PARTICLES_HIGH;
  }
}

// No particle, PREM model or ribbon edge is ever emitted by this instance (event objects untouched):
// the frame the emitters' pixels are measured against.
export function emittersOff(instance: any): void {
  for (const emitter of [...instance.particleEmitters, ...instance.particleEmitters2, ...instance.ribbonEmitters]) {
    emitter.updateEmission = () => undefined;
  }
}

// The viewer's own particle tests (clients/tests/unittester.js getTestBlob, clients/tests/tests/mdx.js):
// Math.random replaced by seededRandom(6) while the test steps and renders; n plain viewer.update()
// calls (each the default 1000/60 ms) and then one viewer.updateAndRender(). Time t here becomes
// N = round(t / TEST_STEP_MS) updates: N - 1 plain updates and one update-and-render; N = 0 is one
// update with a zero step, then the render. Returns N. (`seed`: another stream, to measure the spread of
// what depends on the layout.)
export const TEST_STEP_MS = 1000 / 60;
export const TEST_SEED = 6;

export function stepLikeTests(viewer: any, timeMs: number, seed: number = TEST_SEED): number {
  const steps = Math.round(timeMs / TEST_STEP_MS);
  const random = Math.random;
  Math.random = seededRandom(seed);
  try {
    if (steps > 0) {
      for (let i = 0; i < steps - 1; i++) {
        viewer.update(TEST_STEP_MS);
      }
      viewer.updateAndRender(TEST_STEP_MS);
    } else {
      viewer.update(0);
      viewer.startFrame();
      viewer.render();
    }
  } finally {
    Math.random = random;
  }
  return steps;
}
