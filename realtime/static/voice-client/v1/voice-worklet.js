// AudioWorklet processors of the voice client (loaded by voice-client.js with audioWorklet.addModule).
// `sampleRate` is the AudioContext's rate (the device's: 44.1 or 48 kHz typically).
import { FrameChunker, PlaybackQueue, Resampler, bytesToPcm16, floatToPcm16, pcm16ToFloat, rms } from "./audio-math.js";

// Microphone -> 16 kHz PCM16 frames of `frameMs`, each posted with its RMS level.
class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { targetRate = 16000, frameMs = 20 } = options.processorOptions || {};
    this.resampler = new Resampler(sampleRate, targetRate);
    this.chunker = new FrameChunker(Math.round((targetRate * frameMs) / 1000));
    this.running = true;
    this.port.onmessage = (event) => {
      if (event.data && event.data.type === "stop") this.running = false;
    };
  }

  process(inputs) {
    const input = inputs[0];
    if (!this.running) return false;
    if (!input || input.length === 0) return true;
    let mono = input[0];
    if (input.length > 1) {
      mono = new Float32Array(input[0].length);
      for (const channel of input) for (let i = 0; i < mono.length; i++) mono[i] += channel[i] / input.length;
    }
    for (const frame of this.chunker.push(this.resampler.process(mono))) {
      const pcm = floatToPcm16(frame);
      this.port.postMessage({ type: "audio", pcm: pcm.buffer, level: rms(frame) }, [pcm.buffer]);
    }
    return true;
  }
}

// Agent audio (PCM16 at the server's rate) -> the device rate, through the jitter buffer.
class PlaybackProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { inputRate = 24000, startMs = 80, maxWaitMs = 120, reportMs = 20 } = options.processorOptions || {};
    this.inputRate = inputRate;
    this.resampler = new Resampler(inputRate, sampleRate);
    this.queue = new PlaybackQueue({
      startSamples: Math.round((sampleRate * startMs) / 1000),
      maxWaitSamples: Math.round((sampleRate * maxWaitMs) / 1000),
    });
    this.reportEvery = Math.round((sampleRate * reportMs) / 1000);
    this.sinceReport = 0;
    this.lastReported = -1;
    this.port.onmessage = (event) => this.receive(event.data);
  }

  receive(message) {
    if (message.type === "audio") {
      if (message.rate && message.rate !== this.inputRate) {
        this.inputRate = message.rate;
        this.resampler = new Resampler(message.rate, sampleRate);
      }
      const samples = pcm16ToFloat(bytesToPcm16(new Uint8Array(message.bytes)));
      this.queue.push(this.resampler.process(samples));
      this.report();
    } else if (message.type === "clear") {
      const dropped = this.queue.clear();
      this.resampler.reset();
      this.port.postMessage({ type: "cleared", dropped, queued: this.queue.length, sampleRate });
      this.lastReported = this.queue.length;
    }
  }

  report() {
    this.sinceReport = 0;
    if (this.queue.length === this.lastReported) return;
    this.lastReported = this.queue.length;
    this.port.postMessage({ type: "queue", queued: this.queue.length, playing: this.queue.playing, sampleRate });
  }

  process(_inputs, outputs) {
    const output = outputs[0];
    if (output && output.length > 0) {
      this.queue.pull(output[0]);
      for (let c = 1; c < output.length; c++) output[c].set(output[0]);
      this.sinceReport += output[0].length;
      if (this.sinceReport >= this.reportEvery || this.queue.length === 0) this.report();
    }
    return true;
  }
}

registerProcessor("voice-capture", CaptureProcessor);
registerProcessor("voice-playback", PlaybackProcessor);
