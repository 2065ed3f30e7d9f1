// bench/peer.py's page script: opens one model in mdx-m3-viewer (bundled from its source in a scratch
// folder, never committed), advances it to job.time_ms in the viewer's own frames of job.step_ms (1000/60
// ms; so its emitters are alive), then leaves in window.PEER the versions of the WebGL stack and
// time(mode, frames): `frames` frames drawn and read back (update, clear, render, gl.readPixels of the
// whole canvas), each the same frame again (mode "still": update(0)) or the next one step_ms later (mode
// "animated"), returning {fps, alive: live particles and ribbon edges after the last frame, frame: the
// instance's ms}. window.JOB: viewer_page.ts's job, time_ms, step_ms and file_rates (true: emit at the
// file's rates, undoing the viewer's doubling of every static PRE2 and ribbon emission rate).
import { alive, fileRates, openModel } from './viewer_page';

declare global {
  interface Window { JOB: any; PEER: any; }
}

function stack(gl: WebGLRenderingContext): Record<string, string> {
  const debug = gl.getExtension('WEBGL_debug_renderer_info');
  return {
    renderer: String(debug ? gl.getParameter(debug.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER)),
    vendor: String(debug ? gl.getParameter(debug.UNMASKED_VENDOR_WEBGL) : gl.getParameter(gl.VENDOR)),
    version: String(gl.getParameter(gl.VERSION)),
    glsl: String(gl.getParameter(gl.SHADING_LANGUAGE_VERSION)),
    browser: navigator.userAgent,
  };
}

async function run(): Promise<void> {
  const job = window.JOB;
  const opened = await openModel(job);
  if (!opened) {
    window.PEER = { error: 'the viewer could not load the model' };
    return;
  }
  const { viewer, model, instance } = opened;
  const gl: WebGLRenderingContext = viewer.gl;
  const pixels = new Uint8Array(job.size * job.size * 4);
  if (job.file_rates) {  // the viewer multiplies each emitter's static rate by its "high particles" setting
    fileRates(model);
  }
  instance.setSequenceLoopMode(0);  // as ours: loop unless the sequence is NonLooping (then hold its end)
  viewer.update(0);
  instance.frame = model.sequences[job.sequence]?.interval[0] ?? 0;
  for (let t = 0; t < job.time_ms; t += job.step_ms) {  // the viewer's own loop: update, then draw
    viewer.update(Math.min(job.step_ms, job.time_ms - t));
    viewer.startFrame();
    viewer.render();
  }
  const frame = (dt: number) => {
    viewer.update(dt);
    viewer.startFrame();
    viewer.render();
    gl.readPixels(0, 0, job.size, job.size, gl.RGBA, gl.UNSIGNED_BYTE, pixels);
  };
  for (let i = 0; i < 3; i++) {
    frame(0);  // warm up: shaders, textures and buffers are ready before anything is timed
  }
  const time = (mode: string, frames: number) => {
    const dt = mode === 'animated' ? job.step_ms : 0;
    const start = performance.now();
    for (let i = 0; i < frames; i++) {
      frame(dt);
    }
    const seconds = (performance.now() - start) / 1000;
    return { fps: frames / seconds, alive: alive(instance), frame: instance.frame };
  };
  window.PEER = { ready: true, gl: stack(gl), time };
}

run().catch((e) => { window.PEER = { error: String(e && e.stack || e) }; });
