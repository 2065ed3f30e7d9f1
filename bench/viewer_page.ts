// The part of bench/*_harness.ts shared by the page scripts that drive mdx-m3-viewer (bundled from its
// source in a scratch folder by bench/viewer.py, never committed): a canvas of job.size, the viewer with
// its MDX/BLP/TGA/DDS handlers, textures asked for relative to the model's URL, one scene with the
// job's background and camera, and one instance of the model on the job's sequence (looping).
// job: {model, size, eye, target, up, fov_deg, near, far, sequence, background}.
import ModelViewer from './viewer/src/viewer/viewer';
import mdxHandler from './viewer/src/viewer/handlers/mdx/handler';
import blpHandler from './viewer/src/viewer/handlers/blp/handler';
import tgaHandler from './viewer/src/viewer/handlers/tga/handler';
import ddsHandler from './viewer/src/viewer/handlers/dds/handler';

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
