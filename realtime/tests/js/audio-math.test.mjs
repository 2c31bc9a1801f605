// The browser voice client's arithmetic (realtime/static/voice-client/v1/audio-math.js), under
// Node's built-in test runner: `node --test realtime/tests/js/` (part of `make test`).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  FrameChunker,
  PlaybackQueue,
  Resampler,
  base64ToBytes,
  bytesToBase64,
  bytesToPcm16,
  floatToPcm16,
  pcm16ToBytes,
  pcm16ToFloat,
  rms,
} from "../../static/voice-client/v1/audio-math.js";

function tone(frequency, rate, seconds, amplitude = 0.5) {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * frequency * i) / rate);
  return out;
}

// Feeds the signal in blocks of 128 samples (one render quantum), as the AudioWorklet does.
function resampleInBlocks(resampler, signal, block = 128) {
  const parts = [];
  for (let i = 0; i < signal.length; i += block) parts.push(resampler.process(signal.subarray(i, i + block)));
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

// Peak amplitude of the middle of a signal (away from the filter's start-up).
function steadyPeak(samples) {
  const middle = samples.subarray(Math.floor(samples.length / 4), Math.floor((3 * samples.length) / 4));
  return middle.reduce((m, s) => Math.max(m, Math.abs(s)), 0);
}

describe("Resampler", () => {
  for (const rate of [48000, 44100]) {
    test(`a 1 kHz tone at ${rate} Hz keeps its amplitude and frequency at 16 kHz`, () => {
      const out = resampleInBlocks(new Resampler(rate, 16000), tone(1000, rate, 1));
      // One second in, one second out (less the filter's look-ahead of a few milliseconds).
      assert.ok(out.length > 15900 && out.length <= 16000, `length ${out.length}`);
      const peak = steadyPeak(out);
      assert.ok(Math.abs(peak - 0.5) < 0.005, `peak ${peak}`);
      // It is still a 1 kHz sine: compare with the ideal one at the output's own sample times.
      const ideal = tone(1000, 16000, 1);
      let error = 0;
      for (let i = 4000; i < 12000; i++) error = Math.max(error, Math.abs(out[i] - ideal[i]));
      assert.ok(error < 0.005, `max deviation ${error}`);
    });

    test(`a 12 kHz tone at ${rate} Hz is filtered out, not folded to 4 kHz`, () => {
      const out = resampleInBlocks(new Resampler(rate, 16000), tone(12000, rate, 1));
      const peak = steadyPeak(out);
      // Sample dropping would give a 4 kHz alias at full amplitude (0.5); the low-pass leaves < -60 dB.
      assert.ok(peak < 0.0005, `peak ${peak}`);
    });
  }

  test("speech-band tones pass and the band edge is attenuated", () => {
    for (const [frequency, low, high] of [
      [300, 0.49, 0.51],
      [3400, 0.49, 0.51],
      [6000, 0.49, 0.51],
      [9000, 0, 0.0005],
    ]) {
      const peak = steadyPeak(resampleInBlocks(new Resampler(48000, 16000), tone(frequency, 48000, 0.5)));
      assert.ok(peak >= low && peak <= high, `${frequency} Hz: peak ${peak}`);
    }
  });

  test("24 kHz agent audio is upsampled to the device rate without losing level", () => {
    for (const rate of [44100, 48000]) {
      const out = resampleInBlocks(new Resampler(24000, rate), tone(1000, 24000, 0.5), 1440);
      assert.ok(Math.abs(out.length - rate / 2) < 40, `length ${out.length}`);
      assert.ok(Math.abs(steadyPeak(out) - 0.5) < 0.005);
    }
  });

  test("block sizes do not change the result, and reset starts over", () => {
    const signal = tone(440, 44100, 0.2);
    const a = resampleInBlocks(new Resampler(44100, 16000), signal, 128);
    const resampler = new Resampler(44100, 16000);
    const b = resampleInBlocks(resampler, signal, 1000);
    assert.equal(a.length, b.length);
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) < 1e-6);
    resampler.reset();
    const c = resampleInBlocks(resampler, signal, 37);
    assert.deepEqual(Array.from(c.subarray(0, 100)), Array.from(a.subarray(0, 100)));
  });

  test("equal rates pass samples through", () => {
    const signal = tone(1000, 16000, 0.01);
    assert.deepEqual(new Resampler(16000, 16000).process(signal), signal);
  });
});

describe("PCM16 and base64", () => {
  test("floats become 16-bit integers, clipped at full scale", () => {
    const pcm = floatToPcm16(Float32Array.from([0, 0.5, -0.5, 1, -1, 1.7, -3, Number.NaN, 1e-6]));
    assert.deepEqual(Array.from(pcm), [0, 16384, -16384, 32767, -32768, 32767, -32768, 0, 0]);
  });

  test("integers become floats in [-1, 1)", () => {
    const floats = pcm16ToFloat(Int16Array.from([0, 16384, -32768, 32767]));
    assert.deepEqual(Array.from(floats), [0, 0.5, -1, 32767 / 32768]);
  });

  test("a round trip through float keeps every sample", () => {
    const pcm = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);
    assert.deepEqual(floatToPcm16(pcm16ToFloat(pcm)), pcm);
  });

  test("samples are little-endian bytes", () => {
    const bytes = pcm16ToBytes(Int16Array.from([1, -2, 0x1234]));
    assert.deepEqual(Array.from(bytes), [1, 0, 0xfe, 0xff, 0x34, 0x12]);
    assert.deepEqual(Array.from(bytesToPcm16(bytes)), [1, -2, 0x1234]);
  });

  test("base64 matches Node's and decodes back, for every length remainder", () => {
    for (const length of [0, 1, 2, 3, 4, 5, 640, 641, 642]) {
      const bytes = Uint8Array.from({ length }, (_, i) => (i * 97 + 13) & 255);
      const text = bytesToBase64(bytes);
      assert.equal(text, Buffer.from(bytes).toString("base64"));
      assert.deepEqual(base64ToBytes(text), bytes);
    }
    assert.throws(() => base64ToBytes("AA!A"), /invalid base64/);
  });

  test("rms of a full-scale sine is 1/sqrt(2)", () => {
    assert.ok(Math.abs(rms(tone(1000, 16000, 1, 1)) - Math.SQRT1_2) < 1e-4);
    assert.equal(rms(new Float32Array(0)), 0);
  });
});

describe("FrameChunker", () => {
  test("it cuts any block sizes into 20 ms frames of 320 samples, in order", () => {
    const chunker = new FrameChunker(320);
    const frames = [];
    let next = 0;
    for (const size of [100, 300, 5, 640, 1]) {
      const block = Float32Array.from({ length: size }, () => next++);
      frames.push(...chunker.push(block));
    }
    assert.equal(frames.length, 3);
    assert.deepEqual(
      frames.map((f) => [f.length, f[0], f[319]]),
      [
        [320, 0, 319],
        [320, 320, 639],
        [320, 640, 959],
      ],
    );
  });
});

describe("PlaybackQueue (jitter buffer)", () => {
  const quantum = () => new Float32Array(128);
  const ramp = (from, length) => Float32Array.from({ length }, (_, i) => from + i);

  test("it plays nothing until its threshold is buffered, then plays in arrival order", () => {
    const queue = new PlaybackQueue({ startSamples: 300, maxWaitSamples: 10_000 });
    queue.push(ramp(1, 200));
    const out = quantum();
    assert.equal(queue.pull(out), 0);
    assert.ok(out.every((s) => s === 0));
    assert.equal(queue.length, 200);
    queue.push(ramp(201, 200));
    const played = [];
    for (let i = 0; i < 4; i++) {
      const block = quantum();
      queue.pull(block);
      played.push(...block);
    }
    assert.deepEqual(played.slice(0, 400), Array.from(ramp(1, 400)));
    assert.ok(played.slice(400).every((s) => s === 0));
    assert.equal(queue.length, 0);
  });

  test("running dry waits for a full buffer again", () => {
    const queue = new PlaybackQueue({ startSamples: 256, maxWaitSamples: 10_000 });
    queue.push(ramp(1, 256));
    queue.pull(quantum());
    queue.pull(quantum());
    assert.equal(queue.length, 0);
    // Audio arriving right at the end of the last sample would still play on; one quantum later it
    // is an underrun.
    assert.equal(queue.pull(quantum()), 0);
    queue.push(ramp(1, 100));
    assert.equal(queue.pull(quantum()), 0);
    assert.equal(queue.playing, false);
  });

  test("a sound shorter than the threshold plays after the longest wait", () => {
    const queue = new PlaybackQueue({ startSamples: 1000, maxWaitSamples: 256 });
    queue.push(ramp(1, 50));
    assert.equal(queue.pull(quantum()), 0);
    assert.equal(queue.pull(quantum()), 0);
    const out = quantum();
    assert.equal(queue.pull(out), 50);
    assert.deepEqual(Array.from(out.subarray(0, 50)), Array.from(ramp(1, 50)));
  });

  test("clear drops every queued sample at once, also while playing", () => {
    const queue = new PlaybackQueue({ startSamples: 128 });
    for (let i = 0; i < 10; i++) queue.push(ramp(i * 480, 480));
    queue.pull(quantum());
    assert.equal(queue.length, 4800 - 128);
    assert.equal(queue.clear(), 4800 - 128);
    assert.equal(queue.length, 0);
    const out = quantum();
    assert.equal(queue.pull(out), 0);
    assert.ok(out.every((s) => s === 0));
    // What arrives after the clear starts a new buffer from its own first sample.
    queue.push(ramp(7, 128));
    const next = quantum();
    assert.equal(queue.pull(next), 128);
    assert.equal(next[0], 7);
  });
});
